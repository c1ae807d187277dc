"""ActorQ: an fp32 learner trains while actor processes act with a quantized copy of its policy.

One module per role:

- `constants`: plain constants shared with collation (precision names, the return window).
- `settings`: the run's settings, resolved once from the config (what the actors need is picklable).
- `networks`: the policy and critic networks (DQN Q-network, D4PG policy and distributional critic).
- `dqn`, `d4pg`: the learners (one gradient step on a sampled batch; target networks).
- `replay`: the n-step adder (actor side), the replay buffer and the samples-per-insert limiter.
- `params`: the parameter quantizer: the policy's weights packed once per publish at
  `actorq.comm_bits`, and read back by the actors.
- `execution`: the actors' policy at `quant.actor_bits`, executed for real (int8, fp16, fp32).
- `actor`: the actor loop (act, explore, add, send chunks, pull weights) with its time breakdown.
- `transport`, `ray_transport`: how weights reach the actors and experience reaches the learner;
  a local one (torch.multiprocessing, shared memory, no server) and one on Ray, whose parameter
  server is `ray_server` (a light module: the Ray worker that hosts it imports no torch).
- `learner`: the learner loop that ties them together; `cell`: the pipeline's entry point.
"""
