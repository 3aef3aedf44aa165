package functions

import (
	"crypto/rand"
	"log/slog"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/writethrough/near"
)

// TestThePollerAnnouncesItsDeletes runs the poller as the worker's user,
// which may publish on the announcements' channel (ANNOUNCE_CHANNEL, as
// env.sh and the template set it) and nothing else: a service's local
// tier drops what the poller deleted, and hears the heartbeat that
// confirms it.
func TestThePollerAnnouncesItsDeletes(t *testing.T) {
	service := near.Open(testenv.Cache(t), near.ChannelOptions{Channel: testenv.Getenv(t, "ANNOUNCE_CHANNEL"), Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(service.Close)
	tier := near.New[string](service, near.Options{})
	q := newQueue(t, 30*time.Second, 5)
	startPoller(t, q, testenv.WorkerCacheConfig(t))
	eventually(t, 10*time.Second, "the service's channel did not subscribe", service.Subscribed)
	key := "cache:user:" + rand.Text()
	tier.Reserve(key)("old", false, 3, time.Now().Add(time.Hour))
	sendRaw(t, q, `{"keys":["`+key+`"]}`)
	eventually(t, 20*time.Second, "the key was not dropped", func() bool { _, _, held := tier.Get(key); return !held })
	eventually(t, 10*time.Second, "no confirmation of the poller's announcement", func() bool { return service.Stats().Messages >= 2 })
	if s := service.Stats(); len(s.Flushes) != 0 {
		t.Fatalf("flushed %v: the poller's announcements should come in sequence", s.Flushes)
	}
}
