// Package endpoint is one address in front of a shard of the local cluster,
// as ElastiCache Serverless shows one endpoint for the nodes behind it: new
// connections go to the shard's master; a failover may drop them (Follow),
// or move them to the promoted replica without the clients seeing anything
// (Pause, then Repoint); above a rate it throttles as ElastiCache does
// (Throttle). make e2e and the failover tests run their clusters behind it.
package endpoint
