package poller

import "testing"

func TestQueueARN(t *testing.T) {
	for _, tc := range []struct{ url, region, want string }{
		{"https://sqs.eu-west-1.amazonaws.com/123456789012/cache-invalidation", "us-east-1", "arn:aws:sqs:eu-west-1:123456789012:cache-invalidation"},
		{"https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q", "", "arn:aws-cn:sqs:cn-north-1:123456789012:q"},
		{"https://sqs.us-gov-west-1.amazonaws.com/123456789012/q", "", "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:q"},
		{"http://127.0.0.1:4566/123456789012/cache-invalidation", "us-east-1", "arn:aws:sqs:us-east-1:123456789012:cache-invalidation"},
		{"https://vpce-0a1b.sqs.eu-west-1.vpce.amazonaws.com/123456789012/q", "eu-west-1", "arn:aws:sqs:eu-west-1:123456789012:q"},
		{"http://127.0.0.1:4566/q", "us-east-1", ""},
		{"::", "us-east-1", ""},
	} {
		if got := queueARN(tc.url, tc.region); got != tc.want {
			t.Errorf("queueARN(%q, %q) = %q, want %q", tc.url, tc.region, got, tc.want)
		}
	}
}
