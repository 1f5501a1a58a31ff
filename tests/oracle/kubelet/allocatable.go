package main

import (
	"fmt"
	"strconv"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/utils/cpuset"
)

// reservation is the container manager's GetNodeAllocatableReservation: kube-reserved +
// system-reserved + the hard eviction threshold for memory, with reservedSystemCPUs
// overriding the CPU reservation as the kubelet's server.go does. (Glue: those live in
// unexported container-manager state and in cmd/kubelet.)
func reservation(cfg Config, machine *cadvisorapi.MachineInfo) (v1.ResourceList, error) {
	kube, err := resourceList(cfg.KubeReserved)
	if err != nil {
		return nil, fmt.Errorf("kubeReserved: %w", err)
	}
	system, err := resourceList(cfg.SystemReserved)
	if err != nil {
		return nil, fmt.Errorf("systemReserved: %w", err)
	}
	reservedCPUs, err := cpuset.Parse(cfg.ReservedSystemCPUs)
	if err != nil {
		return nil, fmt.Errorf("reservedSystemCPUs: %w", err)
	}
	if reservedCPUs.Size() > 0 {
		delete(kube, v1.ResourceCPU)
		system[v1.ResourceCPU] = resource.MustParse(strconv.Itoa(reservedCPUs.Size()))
	}
	eviction := v1.ResourceList{}
	if v, ok := cfg.EvictionHard["memory.available"]; ok {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("evictionHard: %w", err)
		}
		eviction[v1.ResourceMemory] = q
	}
	out := v1.ResourceList{}
	for k := range cadvisor.CapacityFromMachineInfo(machine) {
		value := resource.NewQuantity(0, resource.DecimalSI)
		for _, part := range []v1.ResourceList{system, kube, eviction} {
			if q, ok := part[k]; ok {
				value.Add(q)
			}
		}
		if !value.IsZero() {
			out[k] = *value
		}
	}
	return out, nil
}

// nodeObject is the Node the predicate handler reads: capacity from the machine as
// cAdvisor reports it, allocatable as the node status setter computes it (capacity
// minus the reservation, hugepages taken out of memory), device plugin resources as
// the device manager reports them, and maxPods pods.
func nodeObject(machine *cadvisorapi.MachineInfo, cfg Config, reserved v1.ResourceList, dev *devicemanager.ManagerImpl) *v1.Node {
	capacity := cadvisor.CapacityFromMachineInfo(machine)
	capacity[v1.ResourcePods] = *resource.NewQuantity(cfg.MaxPods, resource.DecimalSI)
	allocatable := v1.ResourceList{}
	for k, v := range capacity {
		value := v.DeepCopy()
		if r, ok := reserved[k]; ok {
			value.Sub(r)
		}
		if value.Sign() < 0 {
			value.Set(0)
		}
		allocatable[k] = value
	}
	devCapacity, devAllocatable, _ := dev.GetCapacity(logrDiscard)
	for k, v := range devCapacity {
		capacity[k] = v
	}
	for k, v := range devAllocatable {
		allocatable[k] = v
	}
	for k, v := range capacity {
		if v1helper.IsHugePageResourceName(k) {
			memory := allocatable[v1.ResourceMemory]
			memory.Sub(v)
			if memory.Sign() < 0 {
				memory.Set(0)
			}
			allocatable[v1.ResourceMemory] = memory
		}
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "oracle", Labels: map[string]string{v1.LabelOSStable: "linux"}},
		Status:     v1.NodeStatus{Capacity: capacity, Allocatable: allocatable},
	}
}

func objectMeta(uid string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)}
}
