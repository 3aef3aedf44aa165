// Package elasticache connects a Go service to Amazon ElastiCache for Valkey
// or Redis OSS, serverless or node-based, the way the invalidator's own
// worker connects: TLS with Amazon's roots built in, an ACL user and
// password — given, or read from a secret ([PasswordSecret]) and read again
// for a new connection, after a rotation — or IAM authentication (a SigV4-presigned token
// for every new connection, so tokens never expire under an open
// connection), and connections recycled before ElastiCache drops them.
//
// Build a [Config] from a struct or from the CACHE_* environment
// ([ConfigFromEnv]), then [New] for a valkey-go client, or
// [Config.ClientOption] to tune valkey-go's options first. It depends on valkey-go and the AWS SDK's signer only.
package elasticache
