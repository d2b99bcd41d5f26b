package choice

import (
	"fmt"
	"slices"
	"strings"
)

// Parse returns s as the one of choices it spells; what names the value in
// the error, which lists the choices.
func Parse[T ~string](what, s string, choices ...T) (T, error) {
	if i := slices.Index(choices, T(s)); i >= 0 {
		return choices[i], nil
	}
	names := make([]string, len(choices))
	for i, c := range choices {
		names[i] = string(c)
	}
	list := names[0]
	if n := len(names); n > 1 {
		list = strings.Join(names[:n-1], ", ") + " or " + names[n-1]
	}
	return "", fmt.Errorf("unknown %s %q: use %s", what, s, list)
}

// Each parses every value of a list flag with parse, stopping at the first
// error.
func Each[T any](values []string, parse func(string) (T, error)) ([]T, error) {
	out := make([]T, 0, len(values))
	for _, s := range values {
		v, err := parse(s)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
