package main

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// stubPlugin is a device plugin without a socket: the device manager's exported
// PluginConnected takes any plugin.DevicePlugin, and the devices it reports are fed
// through the exported PluginListAndWatchReceiver, so no gRPC connection is needed.
type stubPlugin struct{ resource string }

func (p stubPlugin) API() pluginapi.DevicePluginClient { return stubClient{} }
func (p stubPlugin) Resource() string                  { return p.resource }
func (p stubPlugin) SocketPath() string                { return "/stub/" + p.resource }

// stubClient answers the device manager's calls as a plugin without preferred
// allocation: options say so, Allocate returns one empty response per container request.
type stubClient struct{}

func (stubClient) GetDevicePluginOptions(context.Context, *pluginapi.Empty, ...grpc.CallOption) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (stubClient) ListAndWatch(context.Context, *pluginapi.Empty, ...grpc.CallOption) (grpc.ServerStreamingClient[pluginapi.ListAndWatchResponse], error) {
	return nil, fmt.Errorf("stub plugin: devices are fed by PluginListAndWatchReceiver")
}

func (stubClient) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest, ...grpc.CallOption) (*pluginapi.PreferredAllocationResponse, error) {
	return nil, fmt.Errorf("stub plugin: no preferred allocation")
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
