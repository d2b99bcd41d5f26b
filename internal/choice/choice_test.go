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
