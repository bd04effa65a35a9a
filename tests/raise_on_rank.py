"""A PyTorch program whose rank 1 fails with a Python exception, recorded
by torchrun's error handler (@record) in TORCHELASTIC_ERROR_FILE."""
import os

from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    rank = int(os.environ["RANK"])
    if rank == 1:
        raise ValueError(f"bad input on rank {rank}")
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
