/* A quarl C policy balancing CartPole on a bare-metal Cortex-M4 (QEMU's mps2-an386 board).
 *
 * The microcontroller runs both the environment (Gymnasium's CartPole-v1 dynamics, in double as
 * Gymnasium computes them; libm's sin/cos) and the exported full-integer policy (policy.c: int8
 * weights in flash, no heap, no libm), and prints each episode's return through semihosting.
 * Build and run: see README.md (make run). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "policy.h"

#if POLICY_OBS_DIM != 4 || !POLICY_DISCRETE || POLICY_N_OUTPUTS != 2
#error "this example drives CartPole-v1: export a CartPole policy (4 observations, 2 actions)"
#endif

#ifndef EPISODES
#define EPISODES 10
#endif
#define MAX_STEPS 500 /* CartPole-v1's time limit */

extern void initialise_monitor_handles(void);

static uint32_t rng_state = 12345u;

/* xorshift32: uniform in [-0.05, 0.05), Gymnasium's reset range */
static double reset_value(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return ((double)rng_state / 4294967296.0) * 0.1 - 0.05;
}

/* One step of Gymnasium's CartPole-v1 (Euler integration); returns 1 while the pole is up. */
static int cartpole_step(double s[4], int32_t action) {
    const double gravity = 9.8, masscart = 1.0, masspole = 0.1, length = 0.5, force_mag = 10.0, tau = 0.02;
    const double total_mass = masscart + masspole, polemass_length = masspole * length;
    const double force = action == 1 ? force_mag : -force_mag;
    const double costheta = cos(s[2]), sintheta = sin(s[2]);
    const double temp = (force + polemass_length * s[3] * s[3] * sintheta) / total_mass;
    const double thetaacc =
        (gravity * sintheta - costheta * temp) / (length * (4.0 / 3.0 - masspole * costheta * costheta / total_mass));
    const double xacc = temp - polemass_length * thetaacc * costheta / total_mass;
    const double theta_limit = 12.0 * 2.0 * 3.141592653589793 / 360.0;
    s[0] += tau * s[1];
    s[1] += tau * xacc;
    s[2] += tau * s[3];
    s[3] += tau * thetaacc;
    return s[0] >= -2.4 && s[0] <= 2.4 && s[2] >= -theta_limit && s[2] <= theta_limit;
}

int main(void) {
    int episode, step, j;
    long total = 0;
    initialise_monitor_handles();
    printf("quarl C policy (%d-bit weights) on a Cortex-M4: CartPole-v1, %d episodes\n", POLICY_WEIGHT_BITS, EPISODES);
    for (episode = 0; episode < EPISODES; ++episode) {
        double state[4];
        float obs[4];
        int32_t action;
        int steps = 0;
        for (j = 0; j < 4; ++j) {
            state[j] = reset_value();
        }
        for (step = 0; step < MAX_STEPS; ++step) {
            for (j = 0; j < 4; ++j) {
                obs[j] = (float)state[j];
            }
            policy_act(obs, &action);
            ++steps; /* reward 1 per step, the last (terminating) one included */
            if (!cartpole_step(state, action)) {
                break;
            }
        }
        total += steps;
        printf("episode %d: return %d\n", episode, steps);
    }
    printf("mean return %ld.%01ld over %d episodes\n", total / EPISODES, (total * 10 / EPISODES) % 10, EPISODES);
    return 0;
}
