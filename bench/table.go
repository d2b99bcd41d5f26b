package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// direction says which side of its goal a figure should be on.
type direction int

const (
	// atMost: lower is better, the goal is a ceiling (seconds, bytes).
	atMost direction = iota
	// atLeast: higher is better, the goal is a floor (operations per second).
	atLeast
)

// row is one figure of a table.
type row struct {
	name     string
	measured float64
	goal     float64
	unit     string
	dir      direction
}

// met reports whether the figure is on the right side of its goal.
func (r row) met() bool {
	if r.dir == atMost {
		return r.measured <= r.goal
	}
	return r.measured >= r.goal
}

// table is a titled list of figures.
type table struct {
	title string
	rows  []row
	// notes are printed under the table: how the figures were taken.
	notes []string
}

// print writes t with aligned columns: what, measured, goal, the ratio
// measured/goal and whether the goal is met.
func (t *table) print(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "%s\n", t.title); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  what\tmeasured\tgoal\tmeasured/goal\tverdict\t")
	for _, r := range t.rows {
		cmp := "<="
		if r.dir == atLeast {
			cmp = ">="
		}
		verdict := "ok"
		if !r.met() {
			verdict = "MISSED"
		}
		fmt.Fprintf(tw, "  %s\t%s %s\t%s %s %s\t%.2f\t%s\t\n",
			r.name, number(r.measured), r.unit, cmp, number(r.goal), r.unit, r.measured/r.goal, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range t.notes {
		if _, err := fmt.Fprintf(w, "  %s\n", n); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// number formats a figure with three significant digits, or as a whole
// number with thousands separators when it is large.
func number(v float64) string {
	if v >= 1000 {
		s := strconv.FormatInt(int64(v+0.5), 10)
		var out []byte
		for i := range len(s) {
			if i > 0 && (len(s)-i)%3 == 0 {
				out = append(out, ',')
			}
			out = append(out, s[i])
		}
		return string(out)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
