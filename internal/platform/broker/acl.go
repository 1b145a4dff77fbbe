package broker

import (
	"fmt"

	"github.com/IBM/sarama"
)

// The principals of a secured Kafka (scripts/stack.sh's cluster): each
// service kind authenticates as its own SCRAM user. paylab-admin, a super
// user, creates topics and these ACLs.
const (
	PrincipalOrders        = "paylab-orders" // the orders API: no write (naive mode is refused)
	PrincipalRelay         = "paylab-relay"
	PrincipalLedger        = "paylab-ledger"
	PrincipalNotifications = "paylab-notifications"
)

// access is one ACL: principal may do operation on the resource.
type access struct {
	principal string
	resource  sarama.AclResourceType
	name      string
	operation sarama.AclOperation
}

// serviceACLs is what each service principal may do, and nothing else is
// allowed (the brokers' authorizer denies what no ACL allows): the relays
// write order-events (the orders API may only see it); each consumer reads it in its own group (CONSUMER_GROUP's
// default, the service's name) and writes the dead-letter topic.
func serviceACLs() []access {
	var acls []access
	topic := func(principal, name string, ops ...sarama.AclOperation) {
		for _, op := range ops {
			acls = append(acls, access{principal, sarama.AclResourceTopic, name, op})
		}
	}
	topic(PrincipalRelay, OrderEvents, sarama.AclOperationWrite, sarama.AclOperationDescribe)
	topic(PrincipalOrders, OrderEvents, sarama.AclOperationDescribe)
	for principal, group := range map[string]string{PrincipalLedger: "ledger", PrincipalNotifications: "notifications"} {
		topic(principal, OrderEvents, sarama.AclOperationRead, sarama.AclOperationDescribe)
		topic(principal, OrderEventsDeadLetter, sarama.AclOperationWrite, sarama.AclOperationDescribe)
		acls = append(acls, access{principal, sarama.AclResourceGroup, group, sarama.AclOperationRead})
	}
	return acls
}

// EnsureACLs creates the services' ACLs (serviceACLs) on a secured Kafka,
// connected as a super user. Creating an ACL that exists changes nothing.
func EnsureACLs(admin sarama.ClusterAdmin) error {
	byResource := map[[2]string]*sarama.ResourceAcls{}
	var out []*sarama.ResourceAcls
	for _, a := range serviceACLs() {
		key := [2]string{a.resource.String(), a.name}
		r, ok := byResource[key]
		if !ok {
			r = &sarama.ResourceAcls{Resource: sarama.Resource{ResourceType: a.resource, ResourceName: a.name,
				ResourcePatternType: sarama.AclPatternLiteral}}
			byResource[key] = r
			out = append(out, r)
		}
		r.Acls = append(r.Acls, &sarama.Acl{Principal: "User:" + a.principal, Host: "*",
			Operation: a.operation, PermissionType: sarama.AclPermissionAllow})
	}
	if err := admin.CreateACLs(out); err != nil {
		return fmt.Errorf("creating the services' Kafka ACLs: %w", err)
	}
	return nil
}
