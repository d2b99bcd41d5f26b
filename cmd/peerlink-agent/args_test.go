package main

import (
	"os"
	"strings"
	"testing"
)

// expandArgs expands $(VAR) in a container's args from env, as the kubelet
// does; a variable env lacks fails t.
func expandArgs(t *testing.T, args []string, env map[string]string) []string {
	t.Helper()
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = os.Expand(strings.NewReplacer("$(", "${", ")", "}").Replace(a), func(k string) string {
			v, ok := env[k]
			if !ok {
				t.Errorf("argument %q uses $(%s), which is not in the environment", a, k)
			}
			return v
		})
	}
	return out
}
