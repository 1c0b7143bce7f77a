package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// The bench's objects come in shapes (hack/bench -shape, BENCH_SHAPE): the tables
// and plots of one shape are never another's, so that a shared run neither mixes
// its rows into the default shape's tables nor overwrites its plots.

// defaultShape is the shape of lines that name none (written before shapes were).
const defaultShape = "disjoint"

func shapeOf(s string) string {
	if s == "" {
		return defaultShape
	}
	return s
}

// shapes are the shapes the runs have, the default first, then in file order.
func shapes(ks []kernelRun, ss []sideRun) []string {
	var out []string
	add := func(s string) {
		if s = shapeOf(s); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, r := range ks {
		add(r.Shape)
	}
	for _, r := range ss {
		add(r.Shape)
	}
	slices.SortStableFunc(out, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == defaultShape:
			return -1
		case b == defaultShape:
			return 1
		}
		return 0
	})
	return out
}

// ofShape are the runs of shape.
func ofShape[T any](runs []T, shape string, shapeOfRun func(T) string) []T {
	var out []T
	for _, r := range runs {
		if shapeOf(shapeOfRun(r)) == shape {
			out = append(out, r)
		}
	}
	return out
}

// plotFile is where shape's plot name goes: the default shape's plots keep their
// names, another shape's get its name as a suffix (sync-shared.png).
func plotFile(dir, name, shape string) string {
	if shape != defaultShape {
		ext := filepath.Ext(name)
		name = strings.TrimSuffix(name, ext) + "-" + shape + ext
	}
	return filepath.Join(dir, name)
}

// servicesColumn is the first column's header of the kernel and side tables.
func servicesColumn(shape string) string {
	if shape == defaultShape {
		return "Services x10 eps"
	}
	return fmt.Sprintf("Services, %s shape", shape)
}

// printShapeHeading names a shape other than the default before its tables.
func printShapeHeading(w io.Writer, shape string) {
	if shape == defaultShape {
		return
	}
	fmt.Fprintf(w, "**Shape: %s** (BENCH_SHAPE=%s; docs/bench.md, \"The shared shape\")\n\n", shape, shape)
}
