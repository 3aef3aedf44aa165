package worker

import (
	"log/slog"
	"time"

	"github.com/invalidator-go/invalidator/invalidate"
)

// stages split a change's lag where the worker can see it: its age when
// its batch began — the writer's call, the wait in the source or queue, the
// receive and the invoke —, then decoding and planning, the deletes, their
// announcement to the local tiers, and the answer (second deletes
// scheduled, re-deletes, records parked). The invalidation has finished
// once the deletes and their announcement are done.
type stages struct {
	started, deleted time.Time
	age              time.Duration // of the batch's oldest change that says when it happened
	plan, delete     time.Duration
	announce, answer time.Duration
}

// stagesOf splits the time of a batch started at started, whose
// Invalidate returned at deleted with m, announcing for announced, and
// which was answered at answered.
func stagesOf(started, deleted, answered time.Time, m invalidate.Metrics, announced time.Duration) stages {
	s := stages{started: started, deleted: deleted, plan: m.Planned, announce: announced, answer: answered.Sub(deleted)}
	invalidating := deleted.Sub(started)
	s.delete = max(0, invalidating-s.plan-s.announce)
	if m.MaxLag > 0 {
		s.age = max(0, m.MaxLag-invalidating)
	}
	return s
}

// figures are the stages as batch-line fields and metrics, in
// milliseconds; the announcement's only when the worker announces.
func (s stages) figures(announcing bool) []figure {
	out := []figure{{"age_ms", "MaxAge", s.age.Milliseconds()}, {"plan_ms", "PlanTime", s.plan.Milliseconds()},
		{"delete_ms", "DeleteTime", s.delete.Milliseconds()}}
	if announcing {
		out = append(out, figure{"announce_ms", "AnnounceTime", s.announce.Milliseconds()})
	}
	return append(out, figure{"answer_ms", "AnswerTime", s.answer.Milliseconds()})
}

// attr is the stages of a record's debug line: when its batch began and
// its deletes were done, for make soak to tell each change's stages apart.
func (s stages) attr() slog.Attr {
	return slog.Group("stages", "started", s.started, "deleted", s.deleted, "plan_ms", s.plan.Milliseconds(),
		"delete_ms", s.delete.Milliseconds(), "announce_ms", s.announce.Milliseconds())
}
