// Command e2eplot draws make e2e's lag file: each path's invalidation lag
// over the run, with the faults shaded.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"os"

	"github.com/invalidator-go/invalidator/bench/plot"
)

func main() {
	in := flag.String("in", "../.local/e2e/lag.json", "the lag file make e2e writes")
	out := flag.String("out", "../.local/e2e/lag.svg", "the plot to write (.svg or .png); make e2e-record draws the tracked ../localstack/e2e/lag.svg")
	flag.Parse()
	log.SetFlags(0)
	data, err := os.ReadFile(*in)
	if err != nil {
		log.Fatal(err)
	}
	var f struct {
		Paths  []string
		Points map[string][][2]float64
		Faults []struct {
			Name     string
			From, To float64
		}
	}
	if err := json.Unmarshal(data, &f); err != nil {
		log.Fatalf("%s: %v", *in, err)
	}
	points := map[string][]plot.Point{}
	for path, pts := range f.Points {
		for _, p := range pts {
			points[path] = append(points[path], plot.Point{At: p[0], LagMs: p[1]})
		}
	}
	var faults []plot.Span
	for _, fl := range f.Faults {
		faults = append(faults, plot.Span{Name: fl.Name, From: fl.From, To: fl.To})
	}
	if err := plot.Lag(*out, f.Paths, points, faults); err != nil {
		log.Fatal(err)
	}
	log.Printf("e2e: lag plot in %s", *out)
}
