"""The vulnerability feed's client: the only code that reads the Wordfence Intelligence v3 feed (its URL, a mirror
or a file). It knows bytes and HTTP; what a record means is the pipeline's (`fleet.model.vulnerability`)."""
