package announce

import (
	"context"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
)

// Valkey publishes through a valkey-go client. A cluster carries a PUBLISH
// from any node to the subscribers of every node, so one that does not
// answer is skipped for another: an announcement fails only when no node
// takes it.
func Valkey(client valkey.Client) Sender { return valkeySender{client} }

type valkeySender struct{ client valkey.Client }

func (s valkeySender) Publish(ctx context.Context, channel, message string) error {
	// Sent twice, a message is applied twice: harmless.
	publish := func(c valkey.Client) error {
		return c.Do(ctx, c.B().Publish().Channel(channel).Message(message).Build().ToRetryable()).Error()
	}
	err := publish(s.client)
	if err == nil || refused(err) {
		return err
	}
	for _, node := range s.client.Nodes() {
		if ctx.Err() != nil {
			break
		}
		if err = publish(node); err == nil || refused(err) {
			return err
		}
	}
	return err
}

// refused tells an answer that another node would give too (NOPERM, a
// wrong argument) from a node that did not answer, or not for now
// (internal/cacheerr).
func refused(err error) bool { return !cacheerr.Transient(err) }
