package elasticache_test

import (
	"testing"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// TestReplicaReadsOnlyWhenAsked: read-only commands go to replicas only
// with ReplicaReads; writes never. (The stack's client builds the commands:
// valkey-go builds none without one.)
func TestReplicaReadsOnlyWhenAsked(t *testing.T) {
	client := testenv.Cache(t)
	get, unlink := client.B().Get().Key("k").Build(), client.B().Unlink().Key("k").Build()
	opt, err := elasticache.Config{Endpoint: "h:6379"}.ClientOption()
	if err != nil || opt.SendToReplicas != nil {
		t.Fatalf("without ReplicaReads: SendToReplicas set %v, err %v", opt.SendToReplicas != nil, err)
	}
	opt, err = elasticache.Config{Endpoint: "h:6379", ReplicaReads: true}.ClientOption()
	if err != nil || opt.SendToReplicas == nil || !opt.SendToReplicas(get) || opt.SendToReplicas(unlink) {
		t.Fatalf("with ReplicaReads, want GET to the replicas and UNLINK to the primary (err %v)", err)
	}
}
