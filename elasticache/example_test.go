package elasticache_test

import (
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/invalidator-go/invalidator/elasticache"
)

// A service connects to ElastiCache Serverless with IAM: a token is signed
// with the service's AWS credentials for every new connection, and
// connections are recycled before ElastiCache's 12 hours.
func Example_iam() {
	var cfg aws.Config // the service's own: config.LoadDefaultConfig(ctx) reads its role
	client, err := elasticache.New(elasticache.Config{
		Endpoint: "orders-abc123.serverless.use1.cache.amazonaws.com:6379",
		TLS:      true,
		Username: "orders-service", // the ElastiCache user ID, with IAM authentication
		IAM:      &elasticache.IAM{CacheName: "orders", Region: cfg.Region, Credentials: cfg.Credentials},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
}
