#!/bin/bash
# One rank (Lanes' or Open MPI's) in the namespace host of its rank number.
r=${LANES_RANK:-${OMPI_COMM_WORLD_RANK:?}}
exec ip netns exec lanes-x$r env LANES_HOSTID=lanes-x-host-$r "$@"
