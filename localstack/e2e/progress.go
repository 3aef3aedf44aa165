package main

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// progress prints a line every 5 s to stderr: the phase of the run and how
// much the writers and readers did.
type progress struct {
	mu    sync.Mutex
	name  string
	done  chan struct{}
	once  sync.Once
	start time.Time
	load  *load
}

func startProgress(start time.Time, l *load) *progress {
	p := &progress{name: "starting", done: make(chan struct{}), start: start, load: l}
	go func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-tick.C:
				p.print()
			}
		}
	}()
	return p
}

func (p *progress) phase(name string) {
	p.mu.Lock()
	p.name = name
	p.mu.Unlock()
	p.print()
}

func (p *progress) print() {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.load
	l.mu.Lock()
	poisons := len(l.poisons)
	l.mu.Unlock()
	fmt.Fprintf(os.Stderr, "e2e %3ds %-32s writes %d (poison %d), reads %d (errors %d)\n", int(time.Since(p.start).Seconds()), p.name,
		l.writes.Load(), poisons, l.reads.Load(), l.readErrors.Load())
}

func (p *progress) stop() { p.once.Do(func() { close(p.done) }) }
