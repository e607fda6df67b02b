package report

import (
	"bytes"
	"image/png"
	"math"
	"testing"
)

// TestChartRenders checks that the chart encodes as a PNG of the expected
// size, with each series' color drawn (bars and legend boxes).
func TestChartRenders(t *testing.T) {
	c := &Chart{
		Title:  "TEST",
		Groups: []string{"A", "B"},
		Series: []string{"ONE", "TWO", "THREE"},
		Values: [][]float64{{1, 2}, {10, math.NaN()}, {0.5, 30}},
		Ref:    1,
	}
	var buf bytes.Buffer
	if err := c.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1400 || b.Dy() != 640 {
		t.Fatalf("size %v", b)
	}
	count := map[[3]uint32]int{}
	for y := 0; y < 640; y++ {
		for x := 0; x < 1400; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			count[[3]uint32{r >> 8, g >> 8, b >> 8}]++
		}
	}
	for i := range c.Series {
		col := Color(i)
		if n := count[[3]uint32{uint32(col.R), uint32(col.G), uint32(col.B)}]; n < 18*18 {
			t.Errorf("series %d: %d pixels of its color", i, n)
		}
	}
}
