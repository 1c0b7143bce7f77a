package main

import (
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// TestWriteWithoutPoints: a plot with no measured point (only another build of
// svcproxy ran) is skipped, not a panic of the log axes; one point is drawn.
func TestWriteWithoutPoints(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.png")
	if err := write(empty, defaultShape, "t", "s", false, []series{{name: "none"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Errorf("a plot without points was written (%v)", err)
	}
	one := filepath.Join(dir, "one.png")
	if err := write(one, "shared", "t", "s", true, []series{{name: "a", xy: plotter.XYs{{X: 1000, Y: 2}}, colour: blue}}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(one); err != nil || st.Size() == 0 {
		t.Errorf("one point: %v", err)
	}
}
