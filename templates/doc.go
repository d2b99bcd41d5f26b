// Package templates renders gateway templates: it turns a template object
// (WgGatewayServerTemplate, WgGatewayClientTemplate, or a custom template of
// any kind with spec.objectKind and spec.template) plus the variables of one
// gateway into the object the gateway controller creates. It also owns the
// default WireGuard templates, wireguard-server and wireguard-client, and the
// offline defaulting of GatewayServer and GatewayClient specs.
//
// It is pure: no client, no I/O, no clock. It does not fetch templates,
// create objects, set owner references or name the Deployment, Service and
// Secret a rendered WgGatewayServer leads to (the reconcilers do), and it
// does not validate the rendered object against its schema (the API server
// does), with one exception: an object or list where the kind's Go type has
// a string, number or boolean (a label value, say) is an error naming the
// field, so that the rendered metadata is always readable.
//
// # Variables
//
// A template sees the fields of Data:
//
//	.Spec        the gateway's spec with Go field names: .Spec.MTU,
//	             .Spec.Endpoint.Port, .Spec.Endpoint.NodePort (*int32),
//	             .Spec.Endpoint.Ports and .NodePorts ([]int32, a server's
//	             port and pinned node port in list form, always agreeing
//	             with Port and NodePort; a client's Ports is its server's
//	             port in list form, empty while the port is unknown),
//	             .Spec.Endpoint.Addresses ([]string, GatewayClient), ...
//	.Name        the gateway's name (the rendered object's name too)
//	.Namespace   the gateway's namespace (the rendered object's too)
//	.GatewayUID  the gateway's UID
//	.ClusterID   the remote cluster's ID (liqo.io/remote-cluster-id)
//	.SecretName  the Secret with the key pair: spec.secretRef.name when the
//	             user gave one, else gw-<name>, generated in-cluster
//
// DataForServer and DataForClient build Data from a typed gateway. Objects
// read from files have not been through the API server, so call
// the spec's Default method (package v1beta1) first to see what the
// controller sees (mtu 1340, port 51840, serviceType ClusterIP, protocol UDP).
//
// # Rules
//
// Render follows these rules.
//
//  1. The template's spec.template holds metadata and spec. Every string
//     value in metadata.name, metadata.namespace, metadata.labels,
//     metadata.annotations and anywhere in spec is a Go text/template,
//     executed with the option missingkey=error. Keys are not templates
//     (a key containing "{{" is an error).
//  2. The rendered object has apiVersion and kind from spec.objectKind and
//     is named .Name in .Namespace. A template may spell out
//     name: "{{ .Name }}", but a name or namespace rendering to anything
//     else is an error: the controller finds the object by the gateway's
//     name. metadata takes only name, namespace, labels and annotations.
//  3. A key starting with ? is optional: it is kept, without the ?, only when
//     its value renders non-empty. Empty means "", 0, false, null, or a map
//     or list all of whose entries are empty, after rendering; so a value
//     may be a scalar, a map or a list, at any depth, also inside list
//     items. The value need not contain a template action: a literal is
//     judged the same way, so ?a: "" and ?a: {} are always dropped and
//     ?a: text is always kept (the ? then changes nothing). A key starts
//     with at most one ?, and a map may not have both k and ?k.
//  4. A value takes the type of the field it fills, read from the Go type of
//     the rendered kind (WgGatewayServer and WgGatewayClient, whose specs
//     embed corev1.ServiceSpec and appsv1.DeploymentSpec, walked by JSON
//     field names). A string becomes an integer in integer fields (ports,
//     replicas, nodePort), a boolean in bool fields (only "true" and
//     "false"), a float in float fields; an int-or-string field (targetPort)
//     takes an integer when the text is one. It stays a string in string
//     fields (env values, args, labels), and a YAML number or boolean
//     written in a string field becomes its text. A number or boolean field
//     rendering empty is an error unless its key is optional.
//  5. For kinds whose Go type the package does not know (a custom tunnel
//     technology), and for fields the Go type lacks: a string that is
//     exactly one action ("{{ .Spec.Endpoint.Port }}", trim markers
//     allowed) and renders an integer in canonical form becomes an integer;
//     every other string stays a string.
//  6. Label and annotation values are always strings, in every kind: in
//     known kinds by rule 4, in unknown kinds (and fields the Go type lacks)
//     under any map keyed labels or annotations, wherever it sits.
//  7. Printing a nil pointer or nil interface renders "", so
//     ?nodePort: "{{ .Spec.Endpoint.NodePort }}" drops when the node port is
//     unset. (The engine appends an internal function, _value, to every
//     printing action for this, the way html/template adds its escapers.)
//  8. Errors name the template object and the path of the field in the
//     rendered object, with the offending template text:
//     spec.deployment.spec.template.spec.containers[0].args[2]: template
//     "--mtu={{ .Spec.Mtu }}": 1:14: at <.Spec.Mtu>: can't evaluate field
//     Mtu in type v1beta1.GatewayServerSpec. Keys that are not plain names
//     are quoted: metadata.labels["liqo.io/remote-cluster-id"].
//  9. No input makes Render panic or run away: a template object of any
//     shape gets an error, the strings of one object render to at most
//     1 MiB, print, printf and println build strings of at most 1 MiB,
//     printf refuses a width or precision above 256 before it formats
//     anything, and all the strings of one object together run at most
//     20000 range iterations and template calls within 500 ms by the wall
//     clock, whatever they do: the deadline is checked before every
//     action and every value, at every write and in every function, and
//     no single call does unbounded work between two checks (functions
//     that format estimate their output from their arguments and refuse
//     above 4 MiB before formatting; eq checks between its operands). The
//     errors name the template object and the field, and quote at most
//     512 bytes of the template.
//  10. A template renders its gateway's WgGateway kind, or a kind the
//     installer allows; never a kind built into Kubernetes (CheckKind).
//  11. A +ports key, as Liqo's templates write it, expands into the ports
//     list of the map it is in: its Ports value renders a list of ports
//     ("[51840]", as {{ .Spec.Endpoint.Ports }} prints), its optional
//     nodePorts the node ports by position, and each port becomes
//     {port, targetPort, protocol: UDP}, with its node port when one is
//     given and not 0, named <namePrefix>-<index> (namePrefix defaults to
//     liqo-tunnel) when there are several. A map with both ports and +ports
//     is an error.
//
// # Functions
//
// Templates have the text/template builtins plus one function:
//
//	join SEP LIST   joins a list of strings: {{ join "," .Spec.Endpoint.Addresses }}
//	                or {{ .Spec.Endpoint.Addresses | join "," }}
//
// print, printf, println, html, js, urlquery and the comparisons (eq, ne,
// lt, le, gt, ge) behave as the builtins, within the size and time limits.
// The names _value, _step and _tick are taken by the engine.
//
// # A worked example
//
// The GatewayServer
//
//	metadata: {name: server, namespace: liqo-tenant-b, labels: {liqo.io/remote-cluster-id: cluster-b}}
//	spec: {endpoint: {serviceType: NodePort}}
//
// rendered with the template fragment
//
//	spec:
//	  service:
//	    spec:
//	      type: "{{ .Spec.Endpoint.ServiceType }}"
//	      ?loadBalancerIP: "{{ .Spec.Endpoint.LoadBalancerIP }}"
//	      ports:
//	      - port: "{{ .Spec.Endpoint.Port }}"
//	        targetPort: "{{ .Spec.Endpoint.Port }}"
//	        ?nodePort: "{{ .Spec.Endpoint.NodePort }}"
//	  deployment:
//	    spec:
//	      template:
//	        spec:
//	          containers:
//	          - args: ["--mtu={{ .Spec.MTU }}"]
//	            env: [{name: MTU, value: "{{ .Spec.MTU }}"}]
//
// gives, after the CRD defaults (port 51840, mtu 1340):
//
//	spec:
//	  service:
//	    spec:
//	      type: NodePort
//	      ports:
//	      - port: 51840
//	        targetPort: 51840
//	  deployment:
//	    spec:
//	      template:
//	        spec:
//	          containers:
//	          - args: ["--mtu=1340"]
//	            env: [{name: MTU, value: "1340"}]
//
// loadBalancerIP and nodePort are unset pointers, so their optional keys are
// gone; port and targetPort are integers because ServicePort's fields are;
// the env value stays the string "1340" because EnvVar.Value is a string.
// With nodePort: 30840 in the gateway, the port would carry nodePort: 30840.
//
// # A template for another tunnel technology
//
// A template may produce any kind: set spec.objectKind to it and write the
// object's metadata and spec under spec.template. The template object itself
// stays a WgGatewayServerTemplate (or WgGatewayClientTemplate), referenced
// from the gateway:
//
//	apiVersion: networking.liqo.io/v1beta1
//	kind: WgGatewayServerTemplate
//	metadata: {name: openvpn-server, namespace: peerlink}
//	spec:
//	  objectKind: {apiVersion: tunnels.example.com/v1, kind: OpenVPNGateway}
//	  template:
//	    metadata:
//	      labels: {liqo.io/remote-cluster-id: "{{ .ClusterID }}"}
//	    spec:
//	      port: "{{ .Spec.Endpoint.Port }}"
//	      mtu: "{{ .Spec.MTU }}"
//	      banner: "peer {{ .ClusterID }} on port {{ .Spec.Endpoint.Port }}"
//	      ?fixedNodePort: "{{ .Spec.Endpoint.NodePort }}"
//
// with spec.serverTemplateRef: {kind: WgGatewayServerTemplate, name:
// openvpn-server} in the GatewayServer. The package does not know the Go
// type of OpenVPNGateway, so rule 5 applies: port and mtu become integers
// (one action each), banner stays a string. A controller for that kind must
// then run the tunnel; peerlink's controllers act on WgGatewayServer and
// WgGatewayClient only. To see the result offline:
//
//	peerlink render -f gatewayserver.yaml -f openvpn-server.yaml
//
// # The default templates
//
// wireguard-server.yaml and wireguard-client.yaml in this directory are
// embedded (Defaults returns them); the controller applies them in its
// namespace when it starts, and `peerlink render` uses them offline.
//
// They render a Deployment of spec.replicas pods, one by default, rolled
// one at a time when there are several (strategy RollingUpdate, surge 1,
// none unavailable) and recreated when there is one (strategy Recreate).
// Its pod, labelled app.kubernetes.io/name: peerlink-gateway,
// networking.liqo.io/gateway-name: <name>, networking.liqo.io/active: "true"
// and liqo.io/remote-cluster-id: <remote id>, runs with service account
// gw-<name> the image ghcr.io/peerlink/peerlink-agent:latest, whose
// entrypoint is peerlink-agent, with these arguments:
//
//	gateway --name=<name> --namespace=<namespace> --remote-cluster-id=<remote id>
//	  --mode=server|client --gateway-uid=<uid> --mtu=<mtu>
//	  --listen-port=<port>                               (server)
//	  --endpoint-address=<a>[,<b>...] --endpoint-port=<port>  (client)
//	  --key-dir=/etc/peerlink/keys --health-probe-bind-address=:8081
//	  --metrics-bind-address=:8082
//
// A client whose server is not known yet renders --endpoint-address= and
// --endpoint-port=0: the agent then waits for the endpoint on its
// GatewayClient. The key Secret .SecretName is mounted read-only at
// /etc/peerlink/keys (files privateKey and publicKey, mode 0400),
// /dev/net/tun comes from a hostPath CharDevice volume, the container adds
// the capability NET_ADMIN and is not privileged, NODE_NAME, NODE_IP (the
// node's address, where the agent sends traffic from the tunnel through
// the overlay), POD_NAME and POD_NAMESPACE come from the downward API, and
// probes ask /readyz and
// /healthz on port 8081. The server also renders a Service of type
// .Spec.Endpoint.ServiceType selecting the active gateway pod by
// networking.liqo.io/gateway-name and networking.liqo.io/active, with UDP
// port and targetPort .Spec.Endpoint.Port and optional nodePort and
// loadBalancerIP. Both render ?secretRef only when the user gave one.
// RenderServer merges the GatewayServer's serviceLabels and
// serviceAnnotations over the Service's.
package templates
