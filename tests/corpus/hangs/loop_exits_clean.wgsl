@group(0) @binding(0) var<storage, read_write> out: array<u32>;

// Every way a loop leaves as written: a while condition, a for condition, break,
// break if, a break inside a switch (leaves the switch only), a return from a
// helper's loop. None is cut, so the check is complete.
fn first_multiple(k: u32, d: u32) -> u32 {
    for (var x = 1u; ; x++) {
        if x % d == 0u && x > k {
            return x;
        }
    }
    return 0u;
}

@compute @workgroup_size(4)
fn main(@builtin(local_invocation_index) lid: u32) {
    var s = 0u;
    var i = 0u;
    while i < 10u + lid {
        i++;
    }
    s += i;
    for (var j = 0u; j < 100u; j++) {
        if j == 7u {
            break;
        }
        switch j % 3u {
            case 0u: {
                break;
            }
            default: {
                s += j;
            }
        }
    }
    var k = 0u;
    loop {
        k += 2u;
        continuing {
            break if k >= 20u;
        }
    }
    s += k + first_multiple(lid * 5u, 3u);
    out[lid] = s;
}
