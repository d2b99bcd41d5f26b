package images

// The images of other projects that clients of the lab pull by their public
// names, such as the Multi-Cluster Services conformance suite's server and
// client pods: made here from this machine's Debian packages (socat,
// netcat-openbsd, busybox-static, which hack/install-deps.sh installs, and
// dash, which every Debian system has) and
// served under those names, since no public registry is reachable.
const (
	// SocatImage runs socat, as the image of that name does, with a shell
	// and the usual commands beside it.
	SocatImage = "docker.io/alpine/socat:1.7.4.4"
	// NetshootImage has no entrypoint: the pod's command runs, with a
	// shell, OpenBSD's nc (-4, -6, -u, -v, -w), nslookup and the usual
	// commands.
	NetshootImage = "docker.io/nicolaka/netshoot:v0.15"
)

// busybox is the static multi-call program whose applets give the tool
// images their commands. Not their shell: Debian's busybox shell runs its
// own applets before any program of PATH, so its nc would shadow
// OpenBSD's; dash is the shell.
const (
	busybox = "/bin/busybox"
	dash    = "/usr/bin/dash"
)

// applets are the busybox commands the tool images hold in /bin; nc is
// not among them (OpenBSD's is).
var applets = []string{
	"awk", "cat", "cut", "echo", "env", "grep", "egrep", "head", "hostname",
	"ip", "ls", "nslookup", "ping", "printf", "ps", "sed", "sleep", "sort", "tail", "tee",
	"test", "[", "timeout", "tr", "true", "false", "uniq", "wc", "wget", "which",
}

// Tools are the tool images, to be published in the registry at host:port
// under their public names (LocalName).
func Tools(registry string) []Component {
	links := make(map[string]string, len(applets))
	for _, a := range applets {
		links["/bin/"+a] = busybox
	}
	links["/bin/sh"] = dash
	return []Component{
		{
			Image:        LocalName(SocatImage, registry),
			HostPrograms: []string{"/usr/bin/socat", busybox, dash},
			Entrypoint:   []string{"/usr/bin/socat"},
			Links:        links,
		},
		{
			Image:        LocalName(NetshootImage, registry),
			HostPrograms: []string{"/usr/bin/nc", busybox, dash},
			Links:        links,
		},
	}
}
