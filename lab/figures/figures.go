package figures

// Figures are the whole-system measurements of a peering in the lab.
type Figures struct {
	// ConnectSeconds runs from the moment `peerlink network connect` has
	// applied its last manifest to both sides reporting Connected.
	ConnectSeconds float64 `json:"connectSeconds"`
	// RecoverySeconds is, for the gateway pod of each side (by cluster ID),
	// the longest time without an answer to a probe sent every
	// 100 ms after the pod is deleted.
	RecoverySeconds map[string]float64 `json:"recoverySeconds"`
	// FailoverSeconds is the same with two gateway replicas on each side:
	// the active pod is deleted and the standby takes over.
	FailoverSeconds map[string]float64 `json:"failoverSeconds"`
	// Tunnel and Bare are pod-to-pod figures between the same pods, through
	// the peering and through a NodePort over the node network.
	Tunnel Path `json:"tunnel"`
	Bare   Path `json:"bare"`
	// Services are the Multi-Cluster Services figures, b exporting to a.
	Services Services `json:"services"`
}

// Path is what one path between two pods carries.
type Path struct {
	// BitsPerSecond is the throughput of one TCP stream.
	BitsPerSecond float64 `json:"bitsPerSecond"`
	// ExchangesPerSecond is the rate of 64-byte request/response round
	// trips on one TCP connection.
	ExchangesPerSecond float64 `json:"exchangesPerSecond"`
}

// Services are the Multi-Cluster Services measurements: how soon an
// export answers by name in the peer, how long a large export set takes to
// be imported, and what the controller and the gateway hold then.
type Services struct {
	// ExportToAnswerSeconds are, for each trial, the time from a
	// ServiceExport's creation to the first answer through its clusterset
	// name in the peer; Median is their median.
	ExportToAnswerSeconds []float64 `json:"exportToAnswerSeconds"`
	MedianExportToAnswer  float64   `json:"medianExportToAnswerSeconds"`
	// Services and Endpoints are the size of the large export set;
	// ImportSeconds the time from its export to every service imported
	// (its ServiceImport made), ReadySeconds to every endpoint imported
	// ready.
	Services      int     `json:"services"`
	Endpoints     int     `json:"endpointsPerService"`
	ImportSeconds float64 `json:"importSeconds"`
	ReadySeconds  float64 `json:"readySeconds"`
	// DirectSeconds is the time the importing cluster's API server takes
	// to accept the same Services and EndpointSlices written directly, as
	// many at once as the controller writes (DirectWorkers): the floor of
	// ReadySeconds.
	DirectSeconds float64 `json:"directSeconds"`
	DirectWorkers int     `json:"directWorkers"`
	// DirectImportsSeconds is the same with the ServiceImport of each
	// Service and its status written too: the four writes of an import.
	DirectImportsSeconds float64 `json:"directImportsSeconds"`
	// EndpointChangeSeconds is the median time an endpoint's readiness
	// change in the exporter takes to show in the importer, the large set
	// in place.
	EndpointChangeSeconds float64 `json:"endpointChangeSeconds"`
	// ReconcileSeconds is, by cluster, the mean time of a reconcile of
	// its services controller during the endpoint changes: the work of a
	// change that grows with the set.
	ReconcileSeconds map[string]float64 `json:"reconcileSeconds"`
	// Restarts are the controller and gateway containers of either side
	// that restarted before the endpoint changes ended, by "<cluster>
	// <controller|gateway>", with why they last ended.
	Restarts map[string]string `json:"restarts,omitempty"`
	// TunnelBytes is what the importing gateway received through the
	// tunnel while the large set was imported.
	TunnelBytes float64 `json:"tunnelBytes"`
	// Memory is the peak resident memory, in bytes, while the large set
	// was imported: the importing cluster's controller and gateway, and the
	// exporting cluster's.
	Memory map[string]float64 `json:"residentMemoryBytes"`
}

// Mesh are the measurements of a full mesh of clusters.
type Mesh struct {
	// Clusters and Peerings are the size of the mesh: every pair peered.
	Clusters int `json:"clusters"`
	Peerings int `json:"peerings"`
	// ConnectedSeconds runs from the first network connect to every
	// peering Connected on both sides; ServicesSeconds to every cluster
	// answered by every other's exported Service, called by name.
	ConnectedSeconds float64 `json:"connectedSeconds"`
	ServicesSeconds  float64 `json:"servicesSeconds"`
	// GatewayMemory is the resident memory, in bytes, of each active
	// gateway pod (one per peering on each side); ControllerMemory that of
	// each cluster's controller.
	GatewayMemory    []float64 `json:"gatewayResidentMemoryBytes"`
	ControllerMemory []float64 `json:"controllerResidentMemoryBytes"`
	// GatewayIdleCPU and ControllerIdleCPU are the CPU each took, in
	// cores, over half a minute with no traffic but the tunnels' own
	// (health pings, keepalives, the service exchange's pings).
	GatewayIdleCPU    []float64 `json:"gatewayIdleCPUCores"`
	ControllerIdleCPU []float64 `json:"controllerIdleCPUCores"`
}
