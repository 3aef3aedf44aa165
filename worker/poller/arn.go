package poller

import (
	"net/url"
	"strings"
)

// queueARN is the ARN of the queue at queueURL: SQS's URLs are
// https://sqs.<region>.amazonaws.com/<account>/<name> (.com.cn in China),
// and an endpoint of another host (a VPC endpoint's, a local stack's) has
// the same path, its region given. Empty when the URL has no such path.
func queueARN(queueURL, region string) string {
	u, err := url.Parse(queueURL)
	if err != nil {
		return ""
	}
	account, name, ok := strings.Cut(strings.Trim(u.Path, "/"), "/")
	if !ok || account == "" || name == "" || strings.Contains(name, "/") {
		return ""
	}
	partition, host := "aws", u.Hostname()
	if r, ok := strings.CutPrefix(host, "sqs."); ok {
		if r, ok := strings.CutSuffix(r, ".amazonaws.com"); ok && !strings.Contains(r, ".") {
			region = r
		} else if r, ok := strings.CutSuffix(r, ".amazonaws.com.cn"); ok && !strings.Contains(r, ".") {
			region, partition = r, "aws-cn"
		}
	}
	if strings.HasPrefix(region, "us-gov-") {
		partition = "aws-us-gov"
	}
	return "arn:" + partition + ":sqs:" + region + ":" + account + ":" + name
}
