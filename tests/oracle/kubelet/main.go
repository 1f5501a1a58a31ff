// Command kubelet-oracle runs the kubelet's own Topology, CPU, memory and device
// managers (k8s.io/kubernetes/pkg/kubelet/cm) on cases read as JSON lines on stdin,
// and prints one JSON line per case: each admission's outcome, the exact CPUs,
// memory blocks and device ids each container got, and the managers' state after
// every operation. toposched's differential test (tests/kubelet/test_oracle.py)
// compares these with toposched.kubelet.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/go-logr/logr"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
)

// namespaceEnv marks the re-executed child that runs in its own mount namespace.
const namespaceEnv = "TOPOSCHED_KUBELET_ORACLE_CHILD"

var logrDiscard = logr.Discard()

// gates are the feature gates the oracle's kubelet runs with: every policy option
// toposched.kubelet models is usable.
var gates = []string{
	"CPUManagerPolicyAlphaOptions=true",
	"CPUManagerPolicyBetaOptions=true",
	"TopologyManagerPolicyAlphaOptions=true",
	"TopologyManagerPolicyBetaOptions=true",
}

func main() {
	if os.Getenv(namespaceEnv) == "" {
		os.Exit(reexec())
	}
	if err := syscall.Mount("tmpfs", "/var/lib", "tmpfs", 0, "size=64m"); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet-oracle: mount a private /var/lib:", err)
		os.Exit(2)
	}
	klog.SetLogger(logrDiscard)
	for _, g := range gates {
		if err := utilfeature.DefaultMutableFeatureGate.Set(g); err != nil {
			fmt.Fprintln(os.Stderr, "kubelet-oracle: feature gate:", err)
			os.Exit(2)
		}
	}
	ctx := klog.NewContext(context.Background(), logrDiscard)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var c Case
		var res Result
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			res.Error = "bad case: " + err.Error()
		} else {
			res = run(ctx, &c)
		}
		if err := enc.Encode(res); err != nil {
			fmt.Fprintln(os.Stderr, "kubelet-oracle:", err)
			os.Exit(2)
		}
		out.Flush()
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet-oracle:", err)
		os.Exit(2)
	}
}

// reexec runs this program again in a new mount namespace, where main mounts a
// private tmpfs on /var/lib: the device manager keeps its socket and checkpoint in
// the fixed /var/lib/kubelet/device-plugins, which the host's and other oracles'
// must not see. Needs root (or CAP_SYS_ADMIN), as the kubelet does.
func reexec() int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubelet-oracle:", err)
		return 2
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), namespaceEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	if err := cmd.Run(); err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "kubelet-oracle: run in a private mount namespace:", err)
		return 2
	}
	return 0
}

// run plays one case on a fresh node; a manager that refuses to start, or panics,
// ends the case with an error.
func run(ctx context.Context, c *Case) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			res = Result{Error: fmt.Sprintf("panic: %v", p)}
		}
	}()
	n, err := newNode(ctx, logrDiscard, c)
	if n != nil {
		defer n.close()
	}
	if err != nil {
		return Result{Error: err.Error()}
	}
	res.Outcomes = []Outcome{}
	for _, op := range c.Ops {
		if op.Admit != nil {
			res.Outcomes = append(res.Outcomes, n.admit(op.Admit))
		} else {
			res.Outcomes = append(res.Outcomes, n.remove(op.Remove))
		}
	}
	return res
}
