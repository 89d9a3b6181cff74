"""3. Networks and their state: the SpecRaGE network (per-view MLPs, fusion, R^-1), its training
state, embedding with a state, and the pre-training networks."""
