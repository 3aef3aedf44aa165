module github.com/invalidator-go/invalidator/bench

go 1.26

require (
	github.com/aws/aws-lambda-go v1.55.1
	github.com/invalidator-go/invalidator v0.0.0
	github.com/valkey-io/valkey-go v1.0.79
)

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0 // indirect
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/sqs v1.53.0 // indirect
	github.com/aws/smithy-go v1.28.9 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/sync v0.6.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)

// The benchmarks measure this checkout.
replace github.com/invalidator-go/invalidator => ../
