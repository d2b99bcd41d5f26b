package templates

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"text/template"
	"time"
)

// bigString is a template prelude that sets $s to a string of 512 KiB
// without a loop: eleven doublings of 256 spaces.
const bigString = `{{ $s := printf "%256s" "" }}` +
	`{{ $s = print $s $s }}{{ $s = print $s $s }}{{ $s = print $s $s }}{{ $s = print $s $s }}` +
	`{{ $s = print $s $s }}{{ $s = print $s $s }}{{ $s = print $s $s }}{{ $s = print $s $s }}` +
	`{{ $s = print $s $s }}{{ $s = print $s $s }}{{ $s = print $s $s }}`

// repeatTo is prelude followed by unit as often as fits in size bytes.
func repeatTo(size int, prelude, unit, end string) string {
	var b strings.Builder
	b.WriteString(prelude)
	for b.Len()+len(unit)+len(end) <= size {
		b.WriteString(unit)
	}
	b.WriteString(end)
	return b.String()
}

// TestRenderDeadlineWithoutLoops renders templates of about 52 KB with no
// range and no template call, each of whose actions is cheap to write and
// costly to run (a copy of half a megabyte, its HTML escaping, the lengths
// of four copies compared in one action): the deadline holds by the wall
// clock all the same, where only range iterations and template calls used
// to check it (the first one ran for 4.5 s and rendered). Each template is
// about twice the deadline's worth of work on a two-core machine of 2026
// (one copy per comparison rendered in 0.47 s there, under the deadline).
func TestRenderDeadlineWithoutLoops(t *testing.T) {
	const size = 52 << 10
	cases := map[string]string{
		"copies":          repeatTo(size, bigString, `{{ $t := print $s }}`, ""),
		"escapes":         repeatTo(size, bigString, `{{ $t := html $s }}`, ""),
		"printing copies": repeatTo(size, bigString, `{{ $t := eq (len (print $s)) (len (print $s)) (len (print $s)) (len (print $s)) }}`, ""),
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			if len(src) < 50<<10 {
				t.Fatalf("template of %d bytes, want about 52 KB", len(src))
			}
			start := time.Now()
			_, err := Render(customTemplate(map[string]any{"v": src}), serverData())
			took := time.Since(start)
			if !errors.Is(err, errTooSlow) {
				t.Fatalf("err = %.300v, want %v", err, errTooSlow)
			}
			if limit := renderTimeout + 250*time.Millisecond; took > limit {
				t.Errorf("took %v to fail, want under %v", took, limit)
			}
			if msg := err.Error(); len(msg) > 2*maxErrorText || !strings.Contains(msg, "spec.v: template") {
				t.Errorf("error of %d bytes, want the field path and at most %d bytes: %.300s", len(msg), 2*maxErrorText, msg)
			}
		})
	}
}

// TestRenderComparisonsBounded runs one action of about 52 KB comparing
// strings of 512 KiB sixteen thousand times: it renders, or fails on the
// deadline, within the deadline either way.
func TestRenderComparisonsBounded(t *testing.T) {
	src := repeatTo(52<<10, bigString+`{{ $a := print $s "a" }}{{ $b := print $s "b" }}{{ if or false`,
		` (eq $a $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b $b)`, ` }}{{ end }}`)
	start := time.Now()
	_, err := Render(customTemplate(map[string]any{"v": src}), serverData())
	took := time.Since(start)
	if err != nil && !errors.Is(err, errTooSlow) {
		t.Fatalf("err = %.300v", err)
	}
	if limit := renderTimeout + 250*time.Millisecond; took > limit {
		t.Errorf("took %v, want under %v", took, limit)
	}
}

// TestRenderCallBounds checks that one call cannot do unbounded work
// between two checks of the deadline: print, html and printf estimate what
// they would build from their arguments and refuse before building it.
func TestRenderCallBounds(t *testing.T) {
	for name, src := range map[string]string{
		"print of many large arguments": bigString + `{{ $t := print` + strings.Repeat(" $s", 2000) + ` }}`,
		"html of many large arguments":  bigString + `{{ $t := html` + strings.Repeat(" $s", 2000) + ` }}`,
		"printf repeating an argument":  bigString + `{{ $t := printf "` + strings.Repeat("%[1]s", 5000) + `" $s }}`,
		"printf padding many verbs":     `{{ $f := printf "%s" "%256d" }}{{ $f = print $f $f $f $f $f $f $f $f }}{{ $f = print $f $f $f $f $f $f $f $f }}{{ $f = print $f $f $f $f $f $f $f $f }}{{ $f = print $f $f $f $f $f $f $f $f }}{{ $t := printf $f }}`,
		"printf extra arguments":        bigString + `{{ $t := printf "x"` + strings.Repeat(" $s", 2000) + ` }}`,
	} {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := Render(customTemplate(map[string]any{"v": src}), serverData())
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, errOutputTooLarge) {
				t.Fatalf("err = %.300v, want %v", err, errOutputTooLarge)
			}
			if took > renderTimeout {
				t.Errorf("took %v", took)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("allocated %d MiB, want under 64 MiB", alloc>>20)
			}
		})
	}
	// Within the bounds, printf formats as fmt does, mistakes included.
	for _, c := range []struct {
		tmpl, format string
		args         []any
	}{
		{`{{ printf "%[2]*[1]d|%-4s|%x|%q|%v" 7 3 "ab" "hi" "a\n" .Name }}`, "%[2]*[1]d|%-4s|%x|%q|%v", []any{7, 3, "ab", "hi", "a\n", "server"}},
		{`{{ printf "%d %d" 1 }}`, "%d %d", []any{1}},
		{`{{ printf "%[3]d" 1 }}`, "%[3]d", []any{1}},
		{`{{ printf "%s" 1 2 }}`, "%s", []any{1, 2}},
		{`{{ printf "%" }}`, "%", nil},
		{`{{ printf "%08.3f|%+.2e|%5.1q" 3.14159 1234.5 "abc" }}`, "%08.3f|%+.2e|%5.1q", []any{3.14159, 1234.5, "abc"}},
	} {
		want := fmt.Sprintf(c.format, c.args...)
		got, err := Render(customTemplate(map[string]any{"v": c.tmpl}), serverData())
		if err != nil {
			t.Errorf("%s: %v", c.tmpl, err)
			continue
		}
		if v := got.Object["spec"].(map[string]any)["v"]; v != want {
			t.Errorf("%s renders %q, want %q", c.tmpl, v, want)
		}
	}
}

// TestComparisonsMatchBuiltins runs the same comparisons through the
// builtins of text/template and through the replacements the engine
// installs: results and failures agree.
func TestComparisonsMatchBuiltins(t *testing.T) {
	operands := []string{`1`, `-1`, `0`, `2`, `1.5`, `"a"`, `"b"`, `true`, `false`, `nil`, `.Spec.MTU`, `.Spec.Replicas`,
		`.Spec.Endpoint.NodePort`, `.Spec.Endpoint.Port`, `.Name`, `.Spec.Endpoint`, `.Spec.ServiceLabels`, `.Spec.Endpoint.Ports`, `(len .Name)`, `.Spec.SecretRef`}
	data := dot(serverData())
	run := func(src string, funcs template.FuncMap) (string, error) {
		tmpl, err := template.New("t").Funcs(funcs).Parse(src)
		if err != nil {
			return "", err
		}
		var b strings.Builder
		err = tmpl.Execute(&b, data)
		return b.String(), err
	}
	ours := funcs(newStepBudget(time.Now().Add(time.Hour)))
	n := 0
	for _, f := range []string{"eq", "ne", "lt", "le", "gt", "ge"} {
		for _, a := range operands {
			for _, b := range operands {
				srcs := []string{fmt.Sprintf("{{ %s %s %s }}", f, a, b)}
				if f == "eq" {
					srcs = append(srcs, fmt.Sprintf("{{ eq %s %s %s 1 }}", a, b, a), fmt.Sprintf("{{ eq %s }}", a))
				}
				for _, src := range srcs {
					want, wantErr := run(src, nil)
					got, gotErr := run(src, ours)
					if got != want || (wantErr == nil) != (gotErr == nil) {
						t.Errorf("%s: builtin %q, %v; ours %q, %v", src, want, wantErr, got, gotErr)
					}
					n++
				}
			}
		}
	}
	if n < 2000 {
		t.Fatalf("%d comparisons", n)
	}
}
