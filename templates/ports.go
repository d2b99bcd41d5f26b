package templates

import (
	"fmt"
	"strconv"
	"strings"
)

// portsDirective is the key of a map entry that expands into the map's
// ports list, as Liqo's gateway templates write it:
//
//	+ports:
//	  Ports: "{{ .Spec.Endpoint.Ports }}"          # required: "[51840]" or "51840 51841"
//	  nodePorts: "{{ .Spec.Endpoint.NodePorts }}"  # optional, by position
//	  namePrefix: wg                                # optional, default liqo-tunnel
//
// becomes ports: [{port: 51840, targetPort: 51840, protocol: UDP}], each
// entry with the node port at its position when there is one, and named
// <namePrefix>-<index> when there are several.
const portsDirective = "+ports"

// defaultPortNamePrefix starts the names of the ports a +ports directive
// makes when there are several.
const defaultPortNamePrefix = "liqo-tunnel"

// expandPorts renders the +ports directive v, found at path, into the
// items of a Service's ports list.
func (r *renderer) expandPorts(path string, v any) ([]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: %s, but the directive is an object with Ports and, optionally, nodePorts and namePrefix", path, typeName(v))
	}
	for _, k := range sortedKeys(m) {
		switch k {
		case "Ports", "nodePorts", "namePrefix":
		default:
			return nil, fmt.Errorf("%s: unknown field %q: the directive takes Ports, nodePorts and namePrefix", childPath(path, k), k)
		}
	}
	if _, ok := m["Ports"]; !ok {
		return nil, fmt.Errorf("%s.Ports: missing: the directive needs the list of ports", path)
	}
	rendered, err := r.object(path, m, stringMapType)
	if err != nil {
		return nil, err
	}
	ports, err := portList(childPath(path, "Ports"), rendered["Ports"], 1)
	if err != nil {
		return nil, err
	}
	nodePorts, err := portList(childPath(path, "nodePorts"), rendered["nodePorts"], 0)
	if err != nil {
		return nil, err
	}
	prefix, _ := rendered["namePrefix"].(string)
	if prefix == "" {
		prefix = defaultPortNamePrefix
	}
	items := make([]any, len(ports))
	for i, p := range ports {
		item := map[string]any{"port": p, "targetPort": p, "protocol": "UDP"}
		if len(ports) > 1 {
			item["name"] = prefix + "-" + strconv.Itoa(i)
		}
		if i < len(nodePorts) && nodePorts[i] != 0 {
			item["nodePort"] = nodePorts[i]
		}
		items[i] = item
	}
	return items, nil
}

// portList parses a rendered list of ports, as Go prints a slice ("[51840
// 51841]") or bare ("51840 51841"); nil or "" is no port. Each port is at
// least min and at most 65535.
func portList(path string, v any, min int64) ([]int64, error) {
	s, _ := v.(string)
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	var out []int64
	for _, f := range strings.Fields(s) {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < min || n > 65535 {
			return nil, fmt.Errorf("%s: renders %q: %q is not a port (%d to 65535)", path, v, f, min)
		}
		out = append(out, n)
	}
	return out, nil
}
