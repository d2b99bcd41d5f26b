package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/peerlink/peerlink/generators"
)

// addOutputFlag adds -o/--output; an empty default means the command acts
// on the cluster unless -o is given.
func addOutputFlag(cmd *cobra.Command, dst *string, def string) {
	cmd.Flags().StringVarP(dst, "output", "o", def, "print the manifests instead of applying them: yaml or json")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
}

// printObjects writes objects in the given format.
func printObjects(w io.Writer, format string, objs ...runtime.Object) error {
	f, err := generators.ParseFormat(format)
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	out, err := generators.Marshal(f, objs...)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// flagErrors rewrites the field errors of a built object so that they name
// the flag the user gave, when there is one: "--node-port: Forbidden: only
// allowed with serviceType NodePort or LoadBalancer". A field of a list
// item (spec.remote.cidr.pod[1]) is looked up without its index too.
func flagErrors(err error, flags map[string]string) error {
	var inv *generators.InvalidError
	if !errors.As(err, &inv) {
		return err
	}
	msgs := make([]string, len(inv.Fields))
	for i, f := range inv.Fields {
		flag, ok := flags[f.Field]
		if !ok {
			flag, ok = flags[listIndex.ReplaceAllString(f.Field, "")]
		}
		if ok {
			msgs[i] = flag + " (" + f.Field + "): " + f.ErrorBody()
		} else {
			msgs[i] = f.Error()
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// listIndex matches the index of a list item in a field path.
var listIndex = regexp.MustCompile(`\[\d+\]`)
