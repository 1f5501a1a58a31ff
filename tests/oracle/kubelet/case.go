package main

import (
	cadvisorapi "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"
)

// Case is one oracle input: a machine, a kubelet configuration, devices and operations.
type Case struct {
	Machine cadvisorapi.MachineInfo `json:"machine"`
	Config  Config                  `json:"config"`
	// Devices maps a device-plugin resource to its devices.
	Devices map[string][]Device `json:"devices"`
	Ops     []Op                `json:"ops"`
}

// Config is the topology-relevant part of a KubeletConfiguration, in its own field names.
type Config struct {
	TopologyManagerPolicy        string              `json:"topologyManagerPolicy"`
	TopologyManagerScope         string              `json:"topologyManagerScope"`
	TopologyManagerPolicyOptions map[string]string   `json:"topologyManagerPolicyOptions"`
	CPUManagerPolicy             string              `json:"cpuManagerPolicy"`
	CPUManagerPolicyOptions      map[string]string   `json:"cpuManagerPolicyOptions"`
	ReservedSystemCPUs           string              `json:"reservedSystemCPUs"`
	KubeReserved                 map[string]string   `json:"kubeReserved"`
	SystemReserved               map[string]string   `json:"systemReserved"`
	EvictionHard                 map[string]string   `json:"evictionHard"`
	MemoryManagerPolicy          string              `json:"memoryManagerPolicy"`
	ReservedMemory               []MemoryReservation `json:"reservedMemory"`
	MaxPods                      int64               `json:"maxPods"`
}

// MemoryReservation is one reservedMemory entry of a KubeletConfiguration.
type MemoryReservation struct {
	NumaNode int32             `json:"numaNode"`
	Limits   map[string]string `json:"limits"`
}

// Device is one device a plugin reports; NUMA nil means no topology.
type Device struct {
	ID   string `json:"id"`
	NUMA []int  `json:"numa"`
}

// Op is one step: admit a pod, or remove an admitted pod by UID.
type Op struct {
	Admit  *v1.Pod `json:"admit,omitempty"`
	Remove string  `json:"remove,omitempty"`
}

// Result is the oracle's answer to one case: a start error, or one outcome per op.
type Result struct {
	Error    string    `json:"error,omitempty"`
	Outcomes []Outcome `json:"outcomes"`
}

// Outcome is what one op did, and the node's state once stale state is collected.
type Outcome struct {
	Admitted   *bool                     `json:"admitted,omitempty"`
	Reason     string                    `json:"reason,omitempty"`
	Message    string                    `json:"message,omitempty"`
	Containers map[string]ContainerState `json:"containers,omitempty"`
	State      NodeState                 `json:"state"`
}

// ContainerState is what one container of an admitted pod holds.
type ContainerState struct {
	CPUs    string              `json:"cpus"`
	Memory  []Block             `json:"memory"`
	Devices map[string][]string `json:"devices"`
}

// Block is one memory manager block.
type Block struct {
	NUMA []int  `json:"numa"`
	Type string `json:"type"`
	Size uint64 `json:"size"`
}

// NodeState is the managers' shared state: the CPU pool and the memory manager's machine state.
type NodeState struct {
	DefaultCPUSet string               `json:"defaultCpuSet"`
	Memory        map[int]NUMAMemState `json:"memory,omitempty"`
}

// NUMAMemState is one NUMA node of the memory manager's machine state.
type NUMAMemState struct {
	Assignments int                  `json:"assignments"`
	Cells       []int                `json:"cells"`
	Tables      map[string][5]uint64 `json:"tables"`
}
