package main

import (
	"time"
)

// stageNames are the stages of a change's lag, in order: the writer's call
// until the source had the change (put-item, publish), the wait in the
// source or queue until its batch began in the worker (the driver's or the
// poller's receive and the invoke included), decoding and planning, the
// deletes, their announcement to the local tiers, and the answer after
// them (second deletes scheduled, the log line). The lag ends when the
// deletes and their announcement are done: the invalidation has finished.
var stageNames = []string{"write", "source", "plan", "delete", "announce", "answer"}

// timeline is what a function's "record invalidated" line tells of one
// change: when it was logged, when its batch began, when the batch's
// deletes were done, and how long planning, deleting and announcing took
// (the worker's split, worker/stages.go).
type timeline struct {
	logged, started, deleted time.Time
	plan, delete, announce   time.Duration
}

// logLine is the part of a "record invalidated" line a timeline is read from.
type logLine struct {
	Time     time.Time
	Function string
	Keys     []string
	Stages   struct {
		Started, Deleted time.Time
		PlanMS           int64 `json:"plan_ms"`
		DeleteMS         int64 `json:"delete_ms"`
		AnnounceMS       int64 `json:"announce_ms"`
	}
}

func (l *logLine) timeline() timeline {
	return timeline{logged: l.Time, started: l.Stages.Started, deleted: l.Stages.Deleted,
		plan: time.Duration(l.Stages.PlanMS) * time.Millisecond, delete: time.Duration(l.Stages.DeleteMS) * time.Millisecond,
		announce: time.Duration(l.Stages.AnnounceMS) * time.Millisecond}
}

// split returns the lag of change c invalidated as t tells, and its stages
// in stageNames' order. A line without stages (an older worker's) ends the
// lag when it was logged, all of it in the source.
func split(c change, t timeline) (lag time.Duration, stages []time.Duration) {
	answered := c.answered
	if answered.IsZero() || answered.Before(c.at) {
		answered = c.at
	}
	if t.started.IsZero() || t.deleted.IsZero() {
		lag = max(0, t.logged.Sub(c.at))
		return lag, []time.Duration{answered.Sub(c.at), max(0, t.logged.Sub(answered)), 0, 0, 0, 0}
	}
	stages = []time.Duration{
		answered.Sub(c.at),
		max(0, t.started.Sub(answered)),
		t.plan,
		t.delete,
		t.announce,
		max(0, t.logged.Sub(t.deleted)),
	}
	return max(0, t.deleted.Sub(c.at)), stages
}
