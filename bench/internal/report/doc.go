// Package report draws the benchmark report's chart: a grouped bar chart
// on a log scale, written with the standard library alone (image,
// image/png) and a built-in 5x7 pixel font for the title, the axis, the
// group names and the legend.
package report
