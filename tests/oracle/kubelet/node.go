package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/utils/cpuset"
)

// devicePluginDir is where the device manager keeps its checkpoint and socket
// (pluginapi.KubeletSocket's directory, a constant): main gives it a private tmpfs.
const devicePluginDir = "/var/lib/kubelet/device-plugins"

// node is one kubelet's resource managers wired as the container manager wires them.
type node struct {
	ctx       context.Context
	log       logr.Logger
	tm        topologymanager.Manager
	dev       *devicemanager.ManagerImpl
	cpu       cpumanager.Manager
	mem       memorymanager.Manager
	predicate lifecycle.PodAdmitHandler
	nodeObj   *v1.Node
	active    []*v1.Pod
	admitting *v1.Pod // active too while it is admitted, as in the kubelet's pod manager
	stateDir  string
}

type readySources struct{}

func (readySources) AddSource(string) {}
func (readySources) AllReady() bool   { return true }

// noStatus makes the CPU manager's reconcile loop skip every container.
type noStatus struct{}

func (noStatus) GetPodStatus(types.UID) (v1.PodStatus, bool) { return v1.PodStatus{}, false }

type noRuntime struct{}

func (noRuntime) UpdateContainerResources(context.Context, string, *runtimeapi.ContainerResources) error {
	return nil
}

// newNode starts the managers for a case as the kubelet's container manager does
// (same constructors, same hint provider order: devices, CPU, memory), or returns
// the error the kubelet would fail to start with.
func newNode(ctx context.Context, log logr.Logger, c *Case) (*node, error) {
	cfg := c.Config
	machine := &c.Machine
	n := &node{ctx: ctx, log: log}
	reserved, err := reservation(cfg, machine)
	if err != nil {
		return nil, err
	}
	n.tm, err = topologymanager.NewManager(log, machine.Topology, cfg.TopologyManagerPolicy, cfg.TopologyManagerScope, cfg.TopologyManagerPolicyOptions)
	if err != nil {
		return nil, fmt.Errorf("topology manager: %w", err)
	}
	if err := os.RemoveAll(devicePluginDir); err != nil {
		return nil, err
	}
	n.dev, err = devicemanager.NewManagerImpl(log, machine.Topology, n.tm)
	if err != nil {
		return nil, fmt.Errorf("device manager: %w", err)
	}
	activePods := n.activePods
	if err := n.dev.Start(log, activePods, readySources{}, containermap.NewContainerMap(), sets.New[string]()); err != nil {
		return nil, fmt.Errorf("device manager start: %w", err)
	}
	for _, name := range sortedKeys(c.Devices) {
		if err := n.dev.PluginConnected(ctx, name, newStubPlugin(name, c.Devices[name])); err != nil {
			return nil, err
		}
		n.dev.PluginListAndWatchReceiver(log, name, &pluginapi.ListAndWatchResponse{Devices: deviceList(c.Devices[name])})
	}
	n.tm.AddHintProvider(log, n.dev)
	n.stateDir, err = os.MkdirTemp("", "kubelet-oracle-")
	if err != nil {
		return nil, err
	}
	reservedCPUs, err := cpuset.Parse(cfg.ReservedSystemCPUs)
	if err != nil {
		return nil, fmt.Errorf("reservedSystemCPUs: %w", err)
	}
	n.cpu, err = cpumanager.NewManager(log, cfg.CPUManagerPolicy, cfg.CPUManagerPolicyOptions, time.Hour, machine, reservedCPUs, reserved, n.stateDir, n.tm)
	if err != nil {
		return nil, fmt.Errorf("cpu manager: %w", err)
	}
	if err := n.cpu.Start(ctx, activePods, readySources{}, noStatus{}, noRuntime{}, containermap.NewContainerMap()); err != nil {
		return nil, fmt.Errorf("cpu manager start: %w", err)
	}
	n.tm.AddHintProvider(log, n.cpu)
	reservedMemory, err := memoryReservations(cfg.ReservedMemory)
	if err != nil {
		return nil, err
	}
	n.mem, err = memorymanager.NewManager(log, cfg.MemoryManagerPolicy, machine, reserved, reservedMemory, n.stateDir, n.tm)
	if err != nil {
		return nil, fmt.Errorf("memory manager: %w", err)
	}
	if err := n.mem.Start(ctx, activePods, readySources{}, noStatus{}, noRuntime{}, containermap.NewContainerMap()); err != nil {
		return nil, fmt.Errorf("memory manager start: %w", err)
	}
	n.tm.AddHintProvider(log, n.mem)
	n.nodeObj = nodeObject(machine, cfg, reserved, n.dev)
	getNode := func(context.Context, bool) (*v1.Node, error) { return n.nodeObj, nil }
	n.predicate = lifecycle.NewPredicateAdmitHandler(getNode, lifecycle.NewAdmissionFailureHandlerStub(), n.dev.UpdatePluginResources)
	return n, nil
}

// activePods is the kubelet's GetActivePods: the admitted pods, and the pod under
// admission (the kubelet adds a pod to its pod manager before admitting it; a refused
// pod turns terminal, so inactive).
func (n *node) activePods() []*v1.Pod {
	pods := append([]*v1.Pod(nil), n.active...)
	if n.admitting != nil {
		pods = append(pods, n.admitting)
	}
	return pods
}

// close stops the device manager's server and removes the state files.
func (n *node) close() {
	_ = n.dev.Stop(n.log)
	if n.stateDir != "" {
		_ = os.RemoveAll(n.stateDir)
	}
}

// admit runs the kubelet's admit handlers that decide resources, in the kubelet's
// order: the container manager's (the Topology Manager, which allocates), then the
// predicate handler (requests against allocatable).
func (n *node) admit(pod *v1.Pod) Outcome {
	attrs := &lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: append([]*v1.Pod(nil), n.active...), Operation: lifecycle.AddOperation}
	n.admitting = pod
	defer func() { n.admitting = nil }()
	for _, h := range []lifecycle.PodAdmitHandler{n.tm, n.predicate} {
		if r := h.Admit(n.ctx, attrs); !r.Admit {
			n.admitting = nil
			no := false
			return Outcome{Admitted: &no, Reason: r.Reason, Message: r.Message, State: n.settle()}
		}
	}
	n.active = append(n.active, pod)
	n.admitting = nil
	yes := true
	out := Outcome{Admitted: &yes, Containers: map[string]ContainerState{}}
	uid := string(pod.UID)
	for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		out.Containers[c.Name] = n.container(uid, c.Name)
	}
	out.State = n.settle()
	return out
}

// remove deletes a pod from the active pods; the managers forget it when they next
// collect stale state, as after the pod's deletion on a real node.
func (n *node) remove(uid string) Outcome {
	kept := n.active[:0]
	for _, p := range n.active {
		if string(p.UID) != uid {
			kept = append(kept, p)
		}
	}
	n.active = kept
	return Outcome{State: n.settle()}
}

// settle makes every manager collect stale state (the pods no longer active, the
// leftovers of refused pods) through the exported calls that do so first thing,
// then reads the state they share.
func (n *node) settle() NodeState {
	probe := &v1.Pod{ObjectMeta: objectMeta("oracle-probe")}
	probe.Spec.Containers = []v1.Container{{Name: "probe"}}
	n.cpu.GetTopologyHints(n.log, probe, &probe.Spec.Containers[0], lifecycle.AddOperation)
	n.mem.GetTopologyHints(n.log, probe, &probe.Spec.Containers[0], lifecycle.AddOperation)
	n.dev.UpdateAllocatedDevices(n.log)
	st := NodeState{DefaultCPUSet: n.cpu.State().GetDefaultCPUSet().String()}
	machineState := n.mem.State().GetMachineState()
	if len(machineState) > 0 {
		st.Memory = map[int]NUMAMemState{}
		for id, s := range machineState {
			tables := map[string][5]uint64{}
			for r, t := range s.MemoryMap {
				tables[string(r)] = [5]uint64{t.TotalMemSize, t.SystemReserved, t.Allocatable, t.Reserved, t.Free}
			}
			st.Memory[id] = NUMAMemState{Assignments: s.NumberOfAssignments, Cells: append([]int{}, s.Cells...), Tables: tables}
		}
	}
	return st
}

// container reads what the managers gave one container.
func (n *node) container(uid, name string) ContainerState {
	out := ContainerState{Memory: []Block{}, Devices: map[string][]string{}}
	if cpus, ok := n.cpu.State().GetCPUSet(uid, name); ok {
		out.CPUs = cpus.String()
	}
	for _, b := range n.mem.State().GetMemoryBlocks(uid, name) {
		out.Memory = append(out.Memory, Block{NUMA: append([]int{}, b.NUMAAffinity...), Type: string(b.Type), Size: b.Size})
	}
	for resource, devs := range n.dev.GetDevices(uid, name) {
		ids := sortedKeys(devs)
		if len(ids) > 0 {
			out.Devices[resource] = ids
		}
	}
	return out
}

func memoryReservations(in []MemoryReservation) ([]kubeletconfig.MemoryReservation, error) {
	var out []kubeletconfig.MemoryReservation
	for _, r := range in {
		limits, err := resourceList(r.Limits)
		if err != nil {
			return nil, fmt.Errorf("reservedMemory: %w", err)
		}
		out = append(out, kubeletconfig.MemoryReservation{NumaNode: r.NumaNode, Limits: limits})
	}
	return out, nil
}

func resourceList(in map[string]string) (v1.ResourceList, error) {
	out := v1.ResourceList{}
	for k, v := range in {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[v1.ResourceName(k)] = q
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
