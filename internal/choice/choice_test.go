package choice

import "testing"

func TestParse(t *testing.T) {
	type mode string
	for _, tc := range []struct {
		s       string
		choices []mode
		want    mode
		err     string
	}{
		{"b", []mode{"a", "b"}, "b", ""},
		{"B", []mode{"a", "b"}, "", `unknown mode "B": use a or b`},
		{"", []mode{"a", "b", "c"}, "", `unknown mode "": use a, b or c`},
		{"x", []mode{"a"}, "", `unknown mode "x": use a`},
	} {
		got, err := Parse("mode", tc.s, tc.choices...)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("Parse(%q, %v) = %q, %v; want %q, %s", tc.s, tc.choices, got, err, tc.want, tc.err)
		}
	}
}

func TestEach(t *testing.T) {
	type mode string
	parse := func(s string) (mode, error) { return Parse("mode", s, mode("a"), mode("b")) }
	got, err := Each([]string{"b", "a"}, parse)
	if err != nil || len(got) != 2 || got[0] != "b" || got[1] != "a" {
		t.Errorf("Each(b, a) = %v, %v; want [b a]", got, err)
	}
	if got, err := Each([]string{"a", "x", "b"}, parse); err == nil || err.Error() != `unknown mode "x": use a or b` || got != nil {
		t.Errorf("Each(a, x, b) = %v, %v; want the error of x and nothing", got, err)
	}
}
