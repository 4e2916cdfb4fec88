"""What the controller reads of the cluster: informer caches, pods, ConfigMaps, GPU inventory."""
