"""The policies the simulator compares: the decision core, the peers, and the hindsight bounds."""
