// Package v20170312 has the few names of the TencentCloud VPC API that
// flannel's tencentvpc backend refers to. Every request fails with
// ErrUnavailable: flanneld built against it runs every backend but
// tencent-vpc.
package v20170312

import "errors"

// ErrUnavailable is returned by every Client method.
var ErrUnavailable = errors.New("the TencentCloud VPC API is not part of this flanneld build")

// Client is the VPC API client; it never reaches the API.
type Client struct{}

// NewClientWithSecretId returns a Client that fails every request.
func NewClientWithSecretId(secretID, secretKey, region string) (*Client, error) {
	return &Client{}, nil
}

// Filter narrows a Describe request.
type Filter struct {
	Name   *string
	Values []*string
}

// Route is one entry of a route table.
type Route struct {
	DestinationCidrBlock *string
	GatewayType          *string
	GatewayId            *string
	RouteType            *string
	RouteId              *uint64
	Enabled              *bool
}

// RouteTable is a VPC route table.
type RouteTable struct {
	RouteTableId *string
	RouteSet     []*Route
}

// DescribeRouteTablesRequest asks for the route tables matching Filters.
type DescribeRouteTablesRequest struct {
	Filters []*Filter
}

// DescribeRouteTablesResponse carries the route tables found.
type DescribeRouteTablesResponse struct {
	Response *struct {
		RouteTableSet []*RouteTable
	}
}

// CreateRoutesRequest adds Routes to a route table.
type CreateRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

// CreateRoutesResponse is the answer to CreateRoutes.
type CreateRoutesResponse struct{}

// DeleteRoutesRequest removes Routes from a route table.
type DeleteRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

// DeleteRoutesResponse is the answer to DeleteRoutes.
type DeleteRoutesResponse struct{}

// NewDescribeRouteTablesRequest returns an empty request.
func NewDescribeRouteTablesRequest() *DescribeRouteTablesRequest {
	return &DescribeRouteTablesRequest{}
}

// NewCreateRoutesRequest returns an empty request.
func NewCreateRoutesRequest() *CreateRoutesRequest { return &CreateRoutesRequest{} }

// NewDeleteRoutesRequest returns an empty request.
func NewDeleteRoutesRequest() *DeleteRoutesRequest { return &DeleteRoutesRequest{} }

// DescribeRouteTables fails with ErrUnavailable.
func (c *Client) DescribeRouteTables(*DescribeRouteTablesRequest) (*DescribeRouteTablesResponse, error) {
	return nil, ErrUnavailable
}

// CreateRoutes fails with ErrUnavailable.
func (c *Client) CreateRoutes(*CreateRoutesRequest) (*CreateRoutesResponse, error) {
	return nil, ErrUnavailable
}

// DeleteRoutes fails with ErrUnavailable.
func (c *Client) DeleteRoutes(*DeleteRoutesRequest) (*DeleteRoutesResponse, error) {
	return nil, ErrUnavailable
}
