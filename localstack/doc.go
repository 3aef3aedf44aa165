// Package localstack holds the local stack: moto for the AWS APIs and a TLS
// cluster with an ACL user standing in for ElastiCache Serverless (up.sh,
// down.sh, env.sh, the provisioning hooks in init/ready.d and a
// docker-compose.yml for LocalStack). Its Go tests are smoke tests proving
// that every part of the stack is real and shaped like AWS.
package localstack
