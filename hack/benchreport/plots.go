package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// A series is one line of a plot: a name, points and a look.
type series struct {
	name   string
	xy     plotter.XYs
	colour color.Color
	dashed bool
}

var (
	blue   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	orange = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	green  = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
)

func kernelXY(ks []kernelRun, y func(kernelRun) float64) plotter.XYs {
	var xy plotter.XYs
	for _, r := range ks {
		if v := y(r); v > 0 {
			xy = append(xy, plotter.XY{X: float64(r.Services), Y: v})
		}
	}
	return xy
}

func sideXY(ss []sideRun, proxy string, y func(sideRun) float64) plotter.XYs {
	var xy plotter.XYs
	for _, r := range bySize(ss, proxy) {
		if v := y(r); v > 0 {
			xy = append(xy, plotter.XY{X: float64(r.Services), Y: v})
		}
	}
	return xy
}

// ticks125 labels 1, 2 and 5 times the powers of ten on a log axis (LogTicks
// labels only the powers, one or two on these axes), the other digits unlabelled.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			out = append(out, t)
		}
	}
	return out
}

// write draws series on log-log axes (the sizes go from 1k to 100k) into file,
// the legend at the top left or the bottom right.
func write(file, shape, title, ylabel string, legendTopLeft bool, ss []series) error {
	points := 0
	for _, s := range ss {
		points += len(s.xy)
	}
	if points == 0 {
		// Nothing measured for this plot (only svcproxy-before ran, say): a
		// log axis has no range to draw.
		fmt.Fprintf(os.Stderr, "benchreport: no points for %s, not drawn\n", file)
		return nil
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "Services (x10 endpoints)"
	if shape != defaultShape {
		p.Title.Text = fmt.Sprintf("%s, %s shape", title, shape)
		p.X.Label.Text = fmt.Sprintf("Services (%s shape, ~10 endpoints each on average)", shape)
	}
	p.Y.Label.Text = ylabel
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = ticks125{}, ticks125{}
	p.Legend.Top, p.Legend.Left = legendTopLeft, legendTopLeft
	p.Add(plotter.NewGrid())
	for _, s := range ss {
		if len(s.xy) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(s.xy)
		if err != nil {
			return err
		}
		l.Color, pts.Color = s.colour, s.colour
		pts.Shape = draw.CircleGlyph{}
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	// Log axes need a range: one size alone (BENCH_SIZES=1000) gets a decade.
	if p.X.Min == p.X.Max {
		p.X.Min, p.X.Max = p.X.Min/3, p.X.Max*3
	}
	if p.Y.Min == p.Y.Max {
		p.Y.Min, p.Y.Max = p.Y.Min/3, p.Y.Max*3
	}
	if legendTopLeft {
		p.Y.Max *= 4 // room above the curves for the legend
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
}

func plotSync(file, shape string, ks []kernelRun, ss []sideRun) error {
	return write(file, shape, "Cold sync", "seconds", false, []series{
		{"svcproxy, whole table into the kernel (in process)", kernelXY(ks, func(r kernelRun) float64 { return r.ColdSecs }), blue, true},
		{"svcproxy, start to every ClusterIP answering (apiserver, traffic)", sideXY(ss, svcproxy, func(r sideRun) float64 { return r.ColdSecs }), blue, false},
		{"kube-proxy nftables, start to every ClusterIP answering", sideXY(ss, kubeProxyN, func(r sideRun) float64 { return r.ColdSecs }), orange, false},
	})
}

func plotRSS(file, shape string, ks []kernelRun, ss []sideRun) error {
	return write(file, shape, "Memory after the cold sync", "MiB", false, []series{
		{"svcproxy RSS (in process, no informers)", kernelXY(ks, func(r kernelRun) float64 { return r.RSSMiB }), green, true},
		{"svcproxy RSS (apiserver, informers)", sideXY(ss, svcproxy, func(r sideRun) float64 { return r.RSSMiB }), blue, false},
		{"svcproxy peak RSS (VmHWM)", sideXY(ss, svcproxy, func(r sideRun) float64 { return r.HWMMiB }), blue, true},
		{"kube-proxy nftables RSS", sideXY(ss, kubeProxyN, func(r sideRun) float64 { return r.RSSMiB }), orange, false},
		{"kube-proxy nftables peak RSS (VmHWM)", sideXY(ss, kubeProxyN, func(r sideRun) float64 { return r.HWMMiB }), orange, true},
	})
}

func plotChange(file, shape string, ks []kernelRun, ss []sideRun) error {
	return write(file, shape, "One endpoint change", "seconds", true, []series{
		{"svcproxy p99, change to commit (in process)", kernelXY(ks, func(r kernelRun) float64 { return r.ChangeP99 }), green, true},
		{"svcproxy p50, change to commit (in process)", kernelXY(ks, func(r kernelRun) float64 { return r.ChangeP50 }), green, false},
		{"svcproxy p50, slice write to answer (apiserver, traffic)", sideXY(ss, svcproxy, func(r sideRun) float64 { return r.ChangeP50 }), blue, false},
		{"kube-proxy nftables p50, slice write to answer", sideXY(ss, kubeProxyN, func(r sideRun) float64 { return r.ChangeP50 }), orange, false},
	})
}
