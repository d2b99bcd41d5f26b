package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/peering"
)

// defaultTimeout bounds each wait of the commands that wait.
const defaultTimeout = 120 * time.Second

// defaultTokenDuration is how long a peer's in-band kubeconfig is valid.
const defaultTokenDuration = 24 * time.Hour

// progress reports the steps of a command on out; each wait lasts timeout,
// which its error calls --timeout.
func progress(out io.Writer, timeout time.Duration) peering.Progress {
	return peering.Progress{Out: out, Timeout: timeout, TimeoutName: "--timeout"}
}

// outputFlag is -o of the commands that print manifests: yaml or json.
type outputFlag struct {
	format string
}

// add adds -o to cmd; an empty default means the command acts on the
// cluster unless -o is given.
func (o *outputFlag) add(cmd *cobra.Command, def string) {
	o.addWithUsage(cmd, def, "print the manifests instead of applying them: yaml or json")
}

func (o *outputFlag) addWithUsage(cmd *cobra.Command, def, usage string) {
	cmd.Flags().StringVarP(&o.format, "output", "o", def, usage)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
}

// check refuses an unknown format, before anything is read.
func (o *outputFlag) check() (manifests.Format, error) {
	f, err := manifests.ParseFormat(o.format)
	if err != nil {
		return "", fmt.Errorf("--output: %w", err)
	}
	return f, nil
}

// print writes objects to the command's output as manifests (no status, no
// empty fields; see manifests.Manifest).
func (o *outputFlag) print(cmd *cobra.Command, objs ...runtime.Object) error {
	docs := make([]map[string]any, len(objs))
	for i, obj := range objs {
		m, err := manifests.Manifest(obj)
		if err != nil {
			return err
		}
		docs[i] = m
	}
	return o.printManifests(cmd.OutOrStdout(), docs...)
}

// printManifests writes manifests: YAML through cli-runtime's printer, as
// kubectl prints it; JSON as package manifests prints it, indented by two spaces
// and several manifests in one v1 List (cli-runtime's printer indents by
// four and prints one document each, which would change every manifest
// printed so far).
func (o *outputFlag) printManifests(w io.Writer, docs ...map[string]any) error {
	f, err := o.check()
	if err != nil {
		return err
	}
	if f == manifests.FormatJSON {
		out, err := manifests.MarshalManifests(f, docs...)
		if err == nil {
			_, err = w.Write(out)
		}
		return err
	}
	p := &printers.YAMLPrinter{}
	for _, m := range docs {
		if err := p.PrintObj(&unstructured.Unstructured{Object: m}, w); err != nil {
			return err
		}
	}
	return nil
}
