package announce

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
)

// Valkey publishes through a valkey-go client. A cluster carries a PUBLISH
// from any node to the subscribers of every node; through the same node
// each time (the first, by address, that answers), one publisher's
// messages arrive in the order it sent them. An announcement fails only
// when no node takes it.
func Valkey(client valkey.Client) Sender { return valkeySender{client} }

type valkeySender struct{ client valkey.Client }

func (s valkeySender) Publish(ctx context.Context, channel, message string) error {
	// Sent twice, through another node after a timeout, a message is
	// applied twice: a flush (Sequences).
	nodes := s.client.Nodes()
	err := errors.New("no node to publish on")
	for _, addr := range slices.Sorted(maps.Keys(nodes)) {
		if ctx.Err() != nil {
			break
		}
		node := nodes[addr]
		err = node.Do(ctx, node.B().Publish().Channel(channel).Message(message).Build()).Error()
		if err == nil || refused(err) {
			return err
		}
	}
	return err
}

// refused tells an answer that another node would give too (NOPERM, a
// wrong argument) from a node that did not answer, or not for now
// (internal/cacheerr).
func refused(err error) bool { return !cacheerr.Transient(err) }
