// Package plot draws the figures of make bench and make e2e with
// gonum/plot: it lives in the bench module so that the main module, which
// services import, does not carry a plotting library.
package plot

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// Throughput draws invalidation throughput by batch size, on log scales:
// the worker at each size, beside the naive per-event loop and the
// server's limit under redis-benchmark, measured in the same run.
func Throughput(path string, sizes []int, worker []float64, naive, limit float64) error {
	p := plot.New()
	p.Title.Text = "Invalidation throughput by batch size"
	p.X.Label.Text = "messages per batch"
	p.Y.Label.Text = "events / s"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	lo, hi := float64(sizes[0]), float64(sizes[len(sizes)-1])
	pts := make(plotter.XYs, len(sizes))
	for i, s := range sizes {
		pts[i] = plotter.XY{X: float64(s), Y: worker[i]}
	}
	for i, s := range []struct {
		name string
		xys  plotter.XYs
		dots bool
	}{
		{"server limit (redis-benchmark UNLINK, pipelined)", plotter.XYs{{X: lo, Y: limit}, {X: hi, Y: limit}}, false},
		{"invalidator (decode, plan, delete)", pts, true},
		{"naive loop (one UNLINK round trip per event)", plotter.XYs{{X: lo, Y: naive}, {X: hi, Y: naive}}, false},
	} {
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return err
		}
		l.Color, l.Width = palette[i], vg.Points(1.5)
		if !s.dots {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(s.name, l)
		if s.dots {
			sc, err := plotter.NewScatter(s.xys)
			if err != nil {
				return err
			}
			sc.Color = palette[i]
			p.Add(sc)
		}
	}
	// The legend sits above the server's limit, out of the lines' way.
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min, p.Y.Max = math.Min(naive, minOf(worker))/2, limit*8
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// Point is one change's invalidation lag on a path, At seconds into the
// run.
type Point struct {
	At, LagMs float64
}

// Span is a fault, From and To seconds into the run.
type Span struct {
	Name     string
	From, To float64
}

// Lag draws each path's invalidation lag over a run, on a log scale, with
// the faults shaded and named.
func Lag(path string, paths []string, points map[string][]Point, faults []Span) error {
	p := plot.New()
	p.Title.Text = "Invalidation lag over the run, by path (faults shaded)"
	p.X.Label.Text = "seconds into the run"
	p.Y.Label.Text = "lag, ms"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	top := 1.0
	for _, pts := range points {
		for _, pt := range pts {
			top = math.Max(top, pt.LagMs)
		}
	}
	top *= 30 // room for the legend and the faults' names above the points
	var labels plotter.XYLabels
	for i, f := range faults {
		poly, err := plotter.NewPolygon(plotter.XYs{{X: f.From, Y: 1}, {X: f.To, Y: 1}, {X: f.To, Y: top}, {X: f.From, Y: top}})
		if err != nil {
			return err
		}
		poly.Color, poly.LineStyle.Width = color.Gray{Y: 0xe4}, 0
		p.Add(poly)
		// Names alternate between two heights so that close faults do not
		// overlap.
		labels.XYs = append(labels.XYs, plotter.XY{X: f.From, Y: top / math.Pow(2.5, float64(2+i%3))})
		labels.Labels = append(labels.Labels, f.Name)
	}
	for i, name := range paths {
		xys := make(plotter.XYs, len(points[name]))
		for j, pt := range points[name] {
			xys[j] = plotter.XY{X: pt.At, Y: math.Max(pt.LagMs, 1)}
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		sc.Color, sc.Radius, sc.Shape = palette[i%len(palette)], vg.Points(1.2), draw.CircleGlyph{}
		p.Add(sc)
		p.Legend.Add(name, sc)
	}
	if len(labels.XYs) > 0 {
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Rotation = 0
			l.TextStyle[i].Font.Size = vg.Points(7)
		}
		p.Add(l)
	}
	p.Y.Min, p.Y.Max = 1, top
	p.Legend.Top = true
	return p.Save(10*vg.Inch, 4.5*vg.Inch, path)
}

func minOf(xs []float64) float64 {
	m := math.Inf(1)
	for _, x := range xs {
		m = math.Min(m, x)
	}
	return m
}
