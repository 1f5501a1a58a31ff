package main

import (
	"context"
	"fmt"
	"sort"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// stubPlugin is a device plugin without a socket: the device manager's exported
// PluginConnected takes any plugin.DevicePlugin, and the devices it reports are fed
// through the exported PluginListAndWatchReceiver, so no gRPC connection is needed.
// rank is each device's place in the plugin's listing.
type stubPlugin struct {
	resource string
	rank     map[string]int
}

func newStubPlugin(resource string, devices []Device) stubPlugin {
	rank := map[string]int{}
	for i, d := range devices {
		rank[d.ID] = i
	}
	return stubPlugin{resource, rank}
}

func (p stubPlugin) API() pluginapi.DevicePluginClient { return stubClient{p.rank} }
func (p stubPlugin) Resource() string                  { return p.resource }
func (p stubPlugin) SocketPath() string                { return "/stub/" + p.resource }

// stubClient answers the device manager's calls as a plugin with a deterministic
// GetPreferredAllocation (the device manager otherwise picks among equally good devices
// in Go's random map order): the devices that must be included, then the available ones
// in listing order. Allocate returns one empty response per container request.
type stubClient struct{ rank map[string]int }

func (stubClient) GetDevicePluginOptions(context.Context, *pluginapi.Empty, ...grpc.CallOption) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

func (stubClient) ListAndWatch(context.Context, *pluginapi.Empty, ...grpc.CallOption) (grpc.ServerStreamingClient[pluginapi.ListAndWatchResponse], error) {
	return nil, fmt.Errorf("stub plugin: devices are fed by PluginListAndWatchReceiver")
}

func (c stubClient) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest, _ ...grpc.CallOption) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, r := range req.ContainerRequests {
		must := map[string]bool{}
		ids := append([]string{}, r.MustIncludeDeviceIDs...)
		for _, id := range ids {
			must[id] = true
		}
		var rest []string
		for _, id := range r.AvailableDeviceIDs {
			if !must[id] {
				rest = append(rest, id)
			}
		}
		sort.Slice(rest, func(i, j int) bool { return c.rank[rest[i]] < c.rank[rest[j]] })
		if n := int(r.AllocationSize) - len(ids); n > 0 {
			ids = append(ids, rest[:min(n, len(rest))]...)
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

func (stubClient) Allocate(_ context.Context, req *pluginapi.AllocateRequest, _ ...grpc.CallOption) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{})
	}
	return resp, nil
}

func (stubClient) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest, ...grpc.CallOption) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// deviceList turns the case's devices into what a plugin's ListAndWatch sends.
func deviceList(devices []Device) []*pluginapi.Device {
	out := make([]*pluginapi.Device, 0, len(devices))
	for _, d := range devices {
		dev := &pluginapi.Device{ID: d.ID, Health: pluginapi.Healthy}
		if d.NUMA != nil {
			dev.Topology = &pluginapi.TopologyInfo{}
			for _, n := range d.NUMA {
				dev.Topology.Nodes = append(dev.Topology.Nodes, &pluginapi.NUMANode{ID: int64(n)})
			}
		}
		out = append(out, dev)
	}
	return out
}
