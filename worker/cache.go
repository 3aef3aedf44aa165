package worker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/internal/cacheerr"
	"github.com/invalidator-go/invalidator/internal/fleetbudget"
	"github.com/invalidator-go/invalidator/invalidate"
)

// connection is the worker's cache: connected in the background from the
// start, and again whenever an attempt failed, so that a process starts
// and answers whether or not the cache can be reached. Until it is
// connected every key fails for now, with the reason: its records are
// retried, never parked.
type connection struct {
	cache elasticache.Config
	opt   valkey.ClientOption // cache's, tuned
	log   *slog.Logger
	signs *signs // told when the first client is made, and of replies

	mu      sync.Mutex
	client  valkey.Client
	dialing chan struct{} // closed when the attempt in flight ends
	err     error         // the last attempt's
	closed  bool
}

// errClosed fails what is asked of a closed connection: for now, as when
// valkey-go's client closes, for the next process to do.
var errClosed = fmt.Errorf("the cache connection is closed: %w", valkey.ErrClosing)

func newConnection(cache elasticache.Config, opt valkey.ClientOption, log *slog.Logger, signs *signs) *connection {
	c := &connection{cache: cache, opt: opt, log: log, signs: signs}
	c.mu.Lock()
	c.dial()
	c.mu.Unlock()
	return c
}

// dial starts an attempt; c.mu is held.
func (c *connection) dial() {
	done := make(chan struct{})
	c.dialing = done
	go func() {
		client, err := valkey.NewClient(c.opt)
		if err != nil {
			err = fmt.Errorf("connect to cache %s: %w", c.cache.Endpoint, err)
		} else {
			c.signs.started(slices.Collect(maps.Keys(client.Nodes())))
		}
		c.mu.Lock()
		if c.closed && client != nil {
			client.Close() // made while closing: nobody will use it
			client, err = nil, errClosed
		}
		switch {
		case c.closed:
		case err == nil && c.err != nil:
			c.log.Info("connected to the cache", "endpoint", c.cache.Endpoint)
		case err != nil && (c.err == nil || c.err.Error() != err.Error()):
			// Once per cause, not once per attempt.
			c.log.Warn("cannot connect to the cache: records fail for now and are retried", "error", err.Error())
		}
		c.client, c.err, c.dialing = client, err, nil
		connected := c.client != nil
		c.mu.Unlock()
		close(done)
		if connected {
			// The topology as first connected, which a promotion is told
			// from: a process frozen before its first batch's check came
			// back would find, thawed, only a topology with no replica
			// promoted that it knew.
			ctx, cancel := context.WithTimeout(context.Background(), windowTurn)
			c.signs.checkTopology(ctx, client)
			cancel()
		}
	}()
}

// get returns the client, waiting for the attempt in flight or starting
// one, until ctx ends.
func (c *connection) get(ctx context.Context) (valkey.Client, error) {
	c.mu.Lock()
	if c.client != nil || c.closed {
		c.mu.Unlock()
		if c.closed {
			return nil, errClosed
		}
		return c.client, nil
	}
	if c.dialing == nil {
		c.dial()
	}
	dialing := c.dialing
	last := c.err
	c.mu.Unlock()
	select {
	case <-dialing:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.client, c.err
	case <-ctx.Done():
		if last != nil {
			return nil, fmt.Errorf("%w (still connecting: %w)", last, ctx.Err())
		}
		return nil, fmt.Errorf("still connecting to cache %s: %w", c.cache.Endpoint, ctx.Err())
	}
}

// Unlink is invalidate.Cache's.
func (c *connection) Unlink(ctx context.Context, keys []string, status []invalidate.KeyStatus) []error {
	client, err := c.get(ctx)
	if err != nil {
		errs := make([]error, len(keys))
		for i := range keys {
			status[i], errs[i] = invalidate.KeyFailed, err
		}
		return errs
	}
	errs := invalidate.Valkey(client).Unlink(ctx, keys, status)
	c.signs.replied(errs...)
	return errs
}

// Tick is invalidate.Cache's.
func (c *connection) Tick(ctx context.Context, clock string) (int64, error) {
	client, err := c.get(ctx)
	if err != nil {
		return 0, err
	}
	n, err := invalidate.Valkey(client).Tick(ctx, clock)
	c.signs.replied(err)
	return n, err
}

// Page is invalidate.Cache's.
func (c *connection) Page(ctx context.Context, key string, reading int64, cursor uint64, count int) ([]invalidate.Member, uint64, error) {
	client, err := c.get(ctx)
	if err != nil {
		return nil, 0, err
	}
	members, next, err := invalidate.Valkey(client).Page(ctx, key, reading, cursor, count)
	c.signs.replied(err)
	return members, next, err
}

// Forget is invalidate.Cache's.
func (c *connection) Forget(ctx context.Context, key string, members []invalidate.Member) error {
	client, err := c.get(ctx)
	if err != nil {
		return err
	}
	err = invalidate.Valkey(client).Forget(ctx, key, members)
	c.signs.replied(err)
	return err
}

// checkTopology asks the cluster's topology for signs, when connected.
func (c *connection) checkTopology(ctx context.Context) {
	c.mu.Lock()
	client := c.client
	c.mu.Unlock()
	if client != nil {
		c.signs.checkTopology(ctx, client)
	}
}

// close ends the connection, or the attempt in flight once it ends; what
// is asked afterwards fails with errClosed.
func (c *connection) close() {
	c.mu.Lock()
	c.closed = true
	dialing, client := c.dialing, c.client
	c.client = nil
	c.mu.Unlock()
	if client != nil {
		client.Close()
	}
	if dialing != nil {
		<-dialing
	}
}

// noteConnections is a valkey-go dialer, its own default, that tells signs
// of every connection made.
func noteConnections(signs *signs) func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
	return func(ctx context.Context, dst string, dialer *net.Dialer, cfg *tls.Config) (conn net.Conn, err error) {
		if cfg != nil {
			conn, err = (&tls.Dialer{NetDialer: dialer, Config: cfg}).DialContext(ctx, "tcp", dst)
		} else {
			conn, err = dialer.DialContext(ctx, "tcp", dst)
		}
		if err == nil {
			signs.connectedTo(dst)
		}
		return conn, err
	}
}

// ping asks every node of the cluster how the cluster is, and returns nil
// as soon as one answers that it is up (CLUSTER INFO's cluster_state:ok):
// a node that answers a PING may still answer CLUSTERDOWN to every delete
// while the cluster comes back together. A node that refuses CLUSTER INFO
// to this user answers all the same; one whose reply may pass (the login
// refused while a password rotates, LOADING) does not.
func (c *connection) ping(ctx context.Context) error {
	client, err := c.get(ctx)
	if err != nil {
		return err
	}
	nodes := client.Nodes()
	answered := make(chan error, len(nodes))
	for _, node := range nodes {
		go func() {
			info, err := node.Do(ctx, node.B().ClusterInfo().Build()).ToString()
			if _, refused := valkey.IsValkeyErr(err); refused && !cacheerr.Transient(err) {
				err = nil // it answers, but this user may not ask (NOPERM)
			} else if err == nil && !strings.Contains(info, "cluster_state:ok") {
				err = errClusterDown
			}
			answered <- err
		}()
	}
	for range nodes {
		if err = <-answered; err == nil {
			return nil
		}
	}
	return err
}

// errClusterDown is a node's answer while its cluster is not whole.
var errClusterDown = errors.New("the cache answers, but its cluster is down")

// budget is the fleet's budget of perSecond ECPUs a second
// (invalidate.ValkeyBudget) through c.
func (c *connection) budget(perSecond float64) invalidate.Budget {
	return connBudget{c, fleetbudget.New(perSecond)}
}

type connBudget struct {
	conn   *connection
	budget *fleetbudget.Budget
}

func (b connBudget) Take(ctx context.Context, want float64, first bool, place int64) (float64, time.Duration, int64, error) {
	client, err := b.conn.get(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	got, wait, next, err := b.budget.Take(ctx, client, want, first, place, fleetbudget.Reserve)
	b.conn.signs.replied(err)
	return got, wait, next, err
}
