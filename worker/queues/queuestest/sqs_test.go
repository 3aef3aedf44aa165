package queuestest

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestSQSRefusesWhatSQSRefuses: the limits moto does not check.
func TestSQSRefusesWhatSQSRefuses(t *testing.T) {
	const url = "https://sqs.us-east-1.amazonaws.com/1/q"
	attr := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	many := map[string]types.MessageAttributeValue{}
	for i := range 11 {
		many["a"+strconv.Itoa(i)] = attr("v")
	}
	for _, c := range []struct {
		name  string
		body  string
		attrs map[string]types.MessageAttributeValue
		ok    bool
	}{
		{"at the limit", strings.Repeat("x", 1024-len("reason")-len("String")-1), map[string]types.MessageAttributeValue{"reason": attr("y")}, true},
		{"over it with its attributes", strings.Repeat("x", 1024-len("reason")-len("String")), map[string]types.MessageAttributeValue{"reason": attr("y")}, false},
		{"eleven attributes", "x", many, false},
		{"an empty attribute", "x", map[string]types.MessageAttributeValue{"reason": attr("")}, false},
		{"U+FFFF in the body", "x\uffff", nil, false},
		{"NUL in an attribute", "x", map[string]types.MessageAttributeValue{"reason": attr("a\x00")}, false},
		{"invalid UTF-8", "x\xff", nil, false},
		{"U+FFFD, tab, newline", "\ufffd\t\r\n<&>", nil, true},
	} {
		f := &SQS{MaxBytes: map[string]int{url: 1024}}
		_, err := f.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(c.body), MessageAttributes: c.attrs})
		if (err == nil) != c.ok || err != nil && !errors.Is(err, errInvalidMessage) {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
}
