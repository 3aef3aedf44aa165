package main

import (
	"encoding/json"
	"os"
	"time"
)

// lagFile is what make e2e plots (bench/cmd/e2eplot): each path's lag over
// the run, and the faults, in seconds from its start.
type lagFile struct {
	Paths  []string                `json:"paths"`
	Points map[string][][2]float64 `json:"points"` // [seconds in, lag ms]
	Faults []lagFault              `json:"faults"`
}

type lagFault struct {
	Name string  `json:"name"`
	From float64 `json:"from"`
	To   float64 `json:"to"`
}

func writeLag(path string, start time.Time, r results, faults []faultResult) error {
	f := lagFile{Paths: paths, Points: map[string][][2]float64{}}
	for _, p := range f.Paths {
		for i, d := range r.lag[p] {
			f.Points[p] = append(f.Points[p], [2]float64{r.lagAt[p][i].Sub(start).Seconds(), float64(d.Microseconds()) / 1000})
		}
	}
	for _, fr := range faults {
		f.Faults = append(f.Faults, lagFault{fr.name, fr.from.Sub(start).Seconds(), fr.to.Sub(start).Seconds()})
	}
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
